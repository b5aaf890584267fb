# The spec DSL front end: no CUDA; yaml-cpp, and of LLVM only LLVM Support (static, for JSON).
# Included by the top-level CMakeLists.txt, which links flashjit_dsl into libflashjit.so.

set(FLASHJIT_DSL_SOURCES
  ${PROJECT_SOURCE_DIR}/compiler/dsl/value.cpp
  ${PROJECT_SOURCE_DIR}/compiler/dsl/diagnostic.cpp
  ${PROJECT_SOURCE_DIR}/compiler/dsl/decl.cpp
  ${PROJECT_SOURCE_DIR}/compiler/dsl/ast.cpp
  ${PROJECT_SOURCE_DIR}/compiler/dsl/lexer.cpp
  ${PROJECT_SOURCE_DIR}/compiler/dsl/parser.cpp
  ${PROJECT_SOURCE_DIR}/compiler/dsl/printer.cpp
  ${PROJECT_SOURCE_DIR}/compiler/dsl/typecheck.cpp
  ${PROJECT_SOURCE_DIR}/compiler/dsl/desugar.cpp
  ${PROJECT_SOURCE_DIR}/compiler/dsl/interpreter.cpp
  ${PROJECT_SOURCE_DIR}/compiler/dsl/interval.cpp
  ${PROJECT_SOURCE_DIR}/compiler/dsl/affine.cpp
  ${PROJECT_SOURCE_DIR}/compiler/dsl/classify.cpp
  ${PROJECT_SOURCE_DIR}/compiler/dsl/kv_range.cpp
  ${PROJECT_SOURCE_DIR}/compiler/dsl/transpose.cpp
  ${PROJECT_SOURCE_DIR}/compiler/dsl/simplify.cpp
  ${PROJECT_SOURCE_DIR}/compiler/dsl/derivative.cpp
  ${PROJECT_SOURCE_DIR}/compiler/dsl/spec.cpp
  ${PROJECT_SOURCE_DIR}/compiler/dsl/spec_validate.cpp
  ${PROJECT_SOURCE_DIR}/compiler/dsl/spec_loader.cpp
  ${PROJECT_SOURCE_DIR}/compiler/dsl/yaml_documents.cpp)


add_library(flashjit_dsl STATIC ${FLASHJIT_DSL_SOURCES})
set_target_properties(flashjit_dsl PROPERTIES POSITION_INDEPENDENT_CODE ON)
target_include_directories(flashjit_dsl PUBLIC ${PROJECT_SOURCE_DIR})
target_link_libraries(flashjit_dsl PUBLIC ${YAML_CPP_LIB})
target_include_directories(flashjit_dsl SYSTEM PRIVATE ${LLVM_INCLUDE_DIR})
target_link_libraries(flashjit_dsl PRIVATE ${LLVM_SUPPORT_LIBS})

# ---- tests ---------------------------------------------------------------------------------
if(FLASHJIT_BUILD_TESTS)
  if(NOT TARGET Catch2::Catch2)
    find_package(Catch2 2 REQUIRED)
  endif()
  include(Catch)
  file(GLOB FLASHJIT_DSL_TEST_SOURCES CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/tests/dsl/*.cpp)
  add_executable(flashjit_dsl_tests ${FLASHJIT_DSL_TEST_SOURCES})
  target_link_libraries(flashjit_dsl_tests PRIVATE flashjit_dsl Catch2::Catch2)
  # The error and round-trip tests run `flashjit check`, the CLI on libflashjit.so (defined after
  # this file is included; a generator expression and add_dependencies resolve at generate time).
  target_compile_definitions(flashjit_dsl_tests PRIVATE
    FLASHJIT_CLI_PATH="$<TARGET_FILE:flashjit_cli>"
    FLASHJIT_SOURCE_DIR="${PROJECT_SOURCE_DIR}")
  add_dependencies(flashjit_dsl_tests flashjit_cli)
  # The test names get a "dsl." prefix so `ctest -R dsl` selects exactly the front end's tests.
  catch_discover_tests(flashjit_dsl_tests TEST_PREFIX "dsl.")

  # Bounded libFuzzer run (clang + ASan + UBSan) over the checked-in corpus; see fuzz/run.sh.
  add_test(NAME dsl_fuzz COMMAND bash ${PROJECT_SOURCE_DIR}/fuzz/run.sh ${PROJECT_BINARY_DIR}/fuzz)
  set_tests_properties(dsl_fuzz PROPERTIES TIMEOUT 600 LABELS fuzz)
endif()
