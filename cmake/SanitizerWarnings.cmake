# The sanitizer build (MOELAB_SANITIZE) is compiled with -Werror in CI like the Release build, but
# g++ 12 under -fsanitize=address inlines, and so warns, differently. Every warning it printed was
# fixed in the code except these known g++ false positives, silenced for the one file each and only
# in this build. Call after every add_subdirectory (sources are named by their target).
function(moelab_sanitizer_warning_exceptions)
  if(NOT MOELAB_SANITIZE OR NOT CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
    return()
  endif()
  # GCC bug 105616: std::regex's automaton (_NFA::_M_insert_*) copies a std::function that
  # -Wmaybe-uninitialized calls uninitialized at -O1 and above with -fsanitize=address (g++ 12 to
  # 14; https://gcc.gnu.org/bugzilla/show_bug.cgi?id=105616). The warning is in libstdc++'s
  # <regex>, instantiated in each file that builds a std::regex.
  set(regex_users moelab_model model/preset_store.cc)
  if(BUILD_TESTING)
    list(APPEND regex_users repo_layout_test tests/repo/layout_test.cc
                            repo_size_test tests/repo/source_scan.cc)
  endif()
  while(regex_users)
    list(POP_FRONT regex_users target source)
    set_property(SOURCE "${PROJECT_SOURCE_DIR}/${source}" TARGET_DIRECTORY ${target} APPEND
                 PROPERTY COMPILE_OPTIONS -Wno-maybe-uninitialized)
  endwhile()
endfunction()
