# The caches and the autotuner's search: no CUDA; of LLVM only LLVM Support (static); yaml-cpp and
# support/. Included by the top-level CMakeLists.txt, which links flashjit_autotune into
# libflashjit.so; nothing here is exported from it (the public cache API is runtime/cache_api.cpp).

set(FLASHJIT_AUTOTUNE_SOURCES
  ${PROJECT_SOURCE_DIR}/autotune/durable_file.cpp
  ${PROJECT_SOURCE_DIR}/autotune/cache_trust.cpp
  ${PROJECT_SOURCE_DIR}/autotune/kernel_entry.cpp
  ${PROJECT_SOURCE_DIR}/autotune/compile_cache.cpp
  ${PROJECT_SOURCE_DIR}/autotune/tuning_key.cpp
  ${PROJECT_SOURCE_DIR}/autotune/tuning_yaml.cpp
  ${PROJECT_SOURCE_DIR}/autotune/tuning_cache.cpp
  ${PROJECT_SOURCE_DIR}/autotune/search.cpp
  ${PROJECT_SOURCE_DIR}/autotune/search_report.cpp)

if(NOT YAML_CPP_LIB)
  find_library(YAML_CPP_LIB NAMES yaml-cpp REQUIRED)  # the shared one: Debian's .a is not PIC
endif()

add_library(flashjit_autotune STATIC ${FLASHJIT_AUTOTUNE_SOURCES})
set_target_properties(flashjit_autotune PROPERTIES POSITION_INDEPENDENT_CODE ON)
target_include_directories(flashjit_autotune PUBLIC ${PROJECT_SOURCE_DIR} ${PROJECT_SOURCE_DIR}/include)
# FLASHJIT_BUILDING: these objects are part of libflashjit.so, so the public classes they use
# (Error, TileConfig) have the same visibility in them as in the library's other objects.
target_compile_definitions(flashjit_autotune PRIVATE FLASHJIT_BUILDING=1 _GNU_SOURCE)
target_link_libraries(flashjit_autotune PUBLIC ${YAML_CPP_LIB})
target_include_directories(flashjit_autotune SYSTEM PRIVATE ${LLVM_INCLUDE_DIR})
target_link_libraries(flashjit_autotune PRIVATE ${LLVM_SUPPORT_LIBS})

# ---- tests ---------------------------------------------------------------------------------
if(FLASHJIT_BUILD_TESTS)
  # libflashjit.so compiles support/*.cpp itself; the tests get their own copy so that they link
  # without the library (whose internal symbols are hidden) and without duplicate definitions.
  add_library(flashjit_support_for_tests STATIC
    ${PROJECT_SOURCE_DIR}/support/text.cpp ${PROJECT_SOURCE_DIR}/support/atomic_file.cpp
    ${PROJECT_SOURCE_DIR}/support/file_read.cpp
    ${PROJECT_SOURCE_DIR}/support/knobs.cpp ${PROJECT_SOURCE_DIR}/support/log.cpp
    ${PROJECT_SOURCE_DIR}/support/hash.cpp ${PROJECT_SOURCE_DIR}/support/clock.cpp)
  target_include_directories(flashjit_support_for_tests PUBLIC ${PROJECT_SOURCE_DIR} ${PROJECT_SOURCE_DIR}/include)
  target_include_directories(flashjit_support_for_tests SYSTEM PRIVATE ${LLVM_INCLUDE_DIR})
  target_link_libraries(flashjit_support_for_tests PRIVATE ${LLVM_SUPPORT_LIBS})

  if(NOT TARGET Catch2::Catch2)
    find_package(Catch2 2 REQUIRED)
  endif()
  include(Catch)
  file(GLOB FLASHJIT_AUTOTUNE_TEST_SOURCES CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/tests/autotune/*.cpp)
  add_executable(flashjit_autotune_tests ${FLASHJIT_AUTOTUNE_TEST_SOURCES})
  target_link_libraries(flashjit_autotune_tests PRIVATE flashjit_autotune flashjit_support_for_tests Catch2::Catch2
                        Threads::Threads)
  target_include_directories(flashjit_autotune_tests SYSTEM PRIVATE ${LLVM_INCLUDE_DIR})  # JSON checks
  # "autotune." prefix: `ctest -R autotune` selects exactly these tests.
  catch_discover_tests(flashjit_autotune_tests TEST_PREFIX "autotune.")
endif()
