# Precompiled headers (MOELAB_PCH): nlohmann/json.hpp and the standard headers most files include
# are parsed once per build instead of once per file (1-4 CPU s saved per file that includes
# json.hpp, -30 % over base/, model/ and report/: results/ci-times.md). Two headers are compiled: one for
# the libraries and programs, one with gtest for the tests (targets linking GTest::gtest), and every
# C++ target reuses one of them (REUSE_FROM), so the build compiles two headers, not one per target;
# a target with its own -O compiles its own.
# Sources compiled with their own options (kernels/ and profiler/'s ISA files) skip it.
#
# g++ only: clang checks a precompiled header's macros against each target's command line more
# strictly (not tried here), and the fuzz build (clang) compiling without one keeps a build in CI
# that would catch a missing #include hidden by the precompiled header. Off (-DMOELAB_PCH=OFF) builds exactly as before.
#
# ccache caches files compiled against a precompiled header only with sloppiness pch_defines and
# time_macros (ccache(1), PRECOMPILED HEADERS): the top-level CMakeLists.txt passes them to ccache.
# Off by default: with the precompiled header g++ 12 inlines differently, and no whole -Werror build
# with it has been seen yet. The one false positive found (fit/storage_tier_hardware.cc:
# -Warray-bounds in a temporary std::string's move) is fixed in the code; turn it on once a full
# -Werror build with it passes (results/ci-times.md).
option(MOELAB_PCH "Precompile nlohmann/json.hpp, gtest.h and common standard headers (g++)" OFF)

set(MOELAB_PCH_HEADERS
    <nlohmann/json.hpp> <algorithm> <cmath> <cstdint> <filesystem> <fstream> <functional> <map>
    <memory> <optional> <set> <sstream> <string> <utility> <vector>)

# Every target defined in `dir` and the folders under it.
function(_moelab_targets_under dir out)
  get_property(targets DIRECTORY "${dir}" PROPERTY BUILDSYSTEM_TARGETS)
  get_property(subdirs DIRECTORY "${dir}" PROPERTY SUBDIRECTORIES)
  foreach(sub IN LISTS subdirs)
    _moelab_targets_under("${sub}" sub_targets)
    list(APPEND targets ${sub_targets})
  endforeach()
  set(${out} ${targets} PARENT_SCOPE)
endfunction()

# The -O options among a target's own compile options (as written, generator expressions too).
function(_moelab_optimization_options target out)
  get_target_property(options ${target} COMPILE_OPTIONS)
  if(NOT options)
    set(options "")
  endif()
  list(FILTER options INCLUDE REGEX "(^|:)-O[0-9s]?>?$")
  set(${out} "${options}" PARENT_SCOPE)
endfunction()

# Call once, after every add_subdirectory: gives each C++ target one of the two headers.
function(moelab_precompile_headers)
  if(NOT MOELAB_PCH OR NOT CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
    message(STATUS "moelab: precompiled headers OFF")
    return()
  endif()
  _moelab_targets_under("${PROJECT_SOURCE_DIR}" targets)
  # The carriers: a target whose only job is to own the compiled header (an empty source; its
  # flags are the project's, which every reusing target shares).
  set(carrier_source "${PROJECT_BINARY_DIR}/moelab_pch.cc")
  file(CONFIGURE OUTPUT "${carrier_source}" CONTENT "// carrier of the precompiled header\n")
  add_library(moelab_pch STATIC "${carrier_source}")
  target_link_libraries(moelab_pch PRIVATE nlohmann_json::nlohmann_json)
  target_precompile_headers(moelab_pch PRIVATE ${MOELAB_PCH_HEADERS})
  set(have_tests OFF)
  if(BUILD_TESTING)
    find_package(GTest REQUIRED)  # tests/ found it too, but its imported targets stay there
    set(have_tests ON)
    add_library(moelab_test_pch STATIC "${carrier_source}")
    target_link_libraries(moelab_test_pch PRIVATE nlohmann_json::nlohmann_json GTest::gtest)
    target_precompile_headers(moelab_test_pch PRIVATE ${MOELAB_PCH_HEADERS} <gtest/gtest.h>)
    moelab_test_optimization(test_level)  # the tests' own -O (cmake/MoelabTest.cmake)
    if(test_level)
      target_compile_options(moelab_test_pch PRIVATE $<$<COMPILE_LANGUAGE:CXX>:${test_level}>)
    endif()
    _moelab_optimization_options(moelab_test_pch test_carrier_levels)
  endif()
  _moelab_optimization_options(moelab_pch carrier_levels)
  set(count 0)
  foreach(target IN LISTS targets)
    get_target_property(type ${target} TYPE)
    if(NOT type MATCHES "^(STATIC_LIBRARY|OBJECT_LIBRARY|EXECUTABLE)$")
      continue()
    endif()
    get_target_property(sources ${target} SOURCES)
    list(FILTER sources INCLUDE REGEX "\\.(cc|cpp)$")
    if(NOT sources)
      continue()  # CUDA-only or generated-only targets
    endif()
    # A source compiled with its own options (-mavx2, -ffp-contract=off...) would find the header
    # compiled without them invalid (-Winvalid-pch, an error under MOELAB_WERROR): it reads the
    # headers' text instead.
    get_target_property(target_dir ${target} SOURCE_DIR)
    foreach(source IN LISTS sources)
      cmake_path(ABSOLUTE_PATH source BASE_DIRECTORY "${target_dir}")
      get_source_file_property(options "${source}" TARGET_DIRECTORY ${target} COMPILE_OPTIONS)
      if(options)
        set_source_files_properties("${source}" TARGET_DIRECTORY ${target} PROPERTIES
                                    SKIP_PRECOMPILE_HEADERS ON)
      endif()
    endforeach()
    get_target_property(libraries ${target} LINK_LIBRARIES)
    _moelab_optimization_options(${target} target_levels)
    # A target whose -O is not its carrier's (kernels/, executor/, profiler/) compiles the header
    # with its own flags: g++ 12 does not check the level of a header it loads, and crashed
    # (internal compiler error in IPA pass cp) compiling kernels/ at -O3 against one precompiled
    # at -O1.
    if(have_tests AND "GTest::gtest" IN_LIST libraries AND target_levels STREQUAL
                                                             test_carrier_levels)
      target_precompile_headers(${target} REUSE_FROM moelab_test_pch)
    elseif(target_levels STREQUAL carrier_levels AND NOT "GTest::gtest" IN_LIST libraries)
      target_precompile_headers(${target} REUSE_FROM moelab_pch)
    else()
      target_precompile_headers(${target} PRIVATE ${MOELAB_PCH_HEADERS})
    endif()
    math(EXPR count "${count} + 1")
  endforeach()
  message(STATUS "moelab: precompiled headers ON (${count} targets)")
endfunction()
