# moelab_test(NAME name SOURCES a.cc ... LIBRARIES lib ... [LABELS gpu slow ...])
# One GoogleTest executable per unit, registered with CTest; test data are found through compile
# definitions, never relative paths.
function(moelab_test)
  cmake_parse_arguments(ARG "" "NAME" "SOURCES;LIBRARIES;LABELS" ${ARGN})
  add_executable(${ARG_NAME} ${ARG_SOURCES})
  target_link_libraries(${ARG_NAME} PRIVATE ${ARG_LIBRARIES} moelab_test_support GTest::gtest GTest::gtest_main)
  add_test(NAME ${ARG_NAME} COMMAND ${ARG_NAME})
  if(ARG_LABELS)
    set_tests_properties(${ARG_NAME} PROPERTIES LABELS "${ARG_LABELS}")
  endif()
endfunction()

# The optimization level of the tests' own code (every target under tests/), lower than the
# libraries': the tests drive the libraries, where the time goes, and check their results. Test
# files (gtest's macros, json) are a third of the files and over half of a build's compile CPU;
# in the sanitizer build -O0 compiled them in 1,911 CPU s, ~0.55 of -O1 (paired files), and in Release -O1
# took 60-90 % of -O3's CPU per file (results/ci-times.md). Empty: the build type's own (Debug).
function(moelab_test_optimization out)
  if(MOELAB_SANITIZE)
    set(level -O0)  # ASan and UBSan instrument it alike
  elseif(CMAKE_BUILD_TYPE MATCHES "^(Release|RelWithDebInfo|MinSizeRel)$")
    set(level -O1)
  else()
    set(level "")
  endif()
  set(${out} "${level}" PARENT_SCOPE)
endfunction()

# Call once, after every add_subdirectory and after moelab_sanitize_targets (which drops targets'
# own -O), before moelab_precompile_headers (which gives the tests a header compiled at this -O).
function(moelab_optimize_tests)
  moelab_test_optimization(level)
  if(NOT BUILD_TESTING OR NOT level)
    return()
  endif()
  _moelab_targets_under("${PROJECT_SOURCE_DIR}/tests" targets)
  foreach(target IN LISTS targets)
    get_target_property(type ${target} TYPE)
    if(type MATCHES "^(STATIC_LIBRARY|OBJECT_LIBRARY|EXECUTABLE)$")
      target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:CXX>:${level}>)
    endif()
  endforeach()
endfunction()
