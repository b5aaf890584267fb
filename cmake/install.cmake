# Install rules and packages, as fmt and spdlog lay them out: `cmake --install build --prefix P`
# (or `make install PREFIX=P`) gives
#   P/lib/libflashjit.so.MAJOR (+ .so link), P/include/flashjit/*.h*, P/bin/flashjit,
#   P/lib/cmake/flashjit/flashjitConfig*.cmake (find_package(flashjit) → flashjit::flashjit),
#   P/lib/pkgconfig/flashjit.pc (pkg-config --cflags --libs flashjit),
# and `make deb` (CPack) packs the same tree under /usr.
if(NOT FLASHJIT_INSTALL)
  return()
endif()
include(CMakePackageConfigHelpers)
# Installing (and CPack, which installs through the `preinstall` target) never builds: `make install`
# and `make deb` build first, and the package test under CTest must not rebuild binaries that other
# tests are running.
set(CMAKE_SKIP_INSTALL_ALL_DEPENDENCY ON)

set(FLASHJIT_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/flashjit)
install(TARGETS flashjit EXPORT flashjitTargets
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/flashjit DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
        FILES_MATCHING PATTERN "*.h" PATTERN "*.hpp")
if(FLASHJIT_BUILD_CLI)
  # The installed CLI finds the installed library wherever the prefix is moved (and under /usr).
  file(RELATIVE_PATH FLASHJIT_BIN_TO_LIB /${CMAKE_INSTALL_BINDIR} /${CMAKE_INSTALL_LIBDIR})
  set_target_properties(flashjit_cli PROPERTIES INSTALL_RPATH "$ORIGIN/${FLASHJIT_BIN_TO_LIB}")
  install(TARGETS flashjit_cli RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
endif()

install(EXPORT flashjitTargets NAMESPACE flashjit:: DESTINATION ${FLASHJIT_CMAKE_DIR})
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/flashjitConfig.cmake.in
                              ${PROJECT_BINARY_DIR}/flashjitConfig.cmake INSTALL_DESTINATION ${FLASHJIT_CMAKE_DIR})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/flashjitConfigVersion.cmake
                                 COMPATIBILITY SameMajorVersion)  # as the SONAME
install(FILES ${PROJECT_BINARY_DIR}/flashjitConfig.cmake ${PROJECT_BINARY_DIR}/flashjitConfigVersion.cmake
        DESTINATION ${FLASHJIT_CMAKE_DIR})

# pkg-config: ${pcfiledir}-relative, so the file is right under any prefix the tree is moved to.
file(RELATIVE_PATH FLASHJIT_PC_TO_PREFIX /${CMAKE_INSTALL_LIBDIR}/pkgconfig /)
string(REGEX REPLACE "/$" "" FLASHJIT_PC_TO_PREFIX "${FLASHJIT_PC_TO_PREFIX}")
configure_file(${PROJECT_SOURCE_DIR}/cmake/flashjit.pc.in ${PROJECT_BINARY_DIR}/flashjit.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/flashjit.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)

# ---- `make deb`: a Debian package of the install tree under /usr ------------------------------------
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME flashjit)
set(CPACK_PACKAGE_VENDOR flashjit)
set(CPACK_PACKAGE_CONTACT "flashjit maintainers <flashjit@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "${PROJECT_DESCRIPTION}")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION devel)
# LLVM is inside libflashjit.so; what it and the CLI load (DT_NEEDED) is the C and C++ runtimes,
# yaml-cpp's shared library and the compression libraries: Debian 12's packages of those.
# tests/embed/check_deb.sh fails when a DT_NEEDED library comes from a package not listed here.
set(CPACK_DEBIAN_PACKAGE_DEPENDS "libc6, libstdc++6, libgcc-s1, libyaml-cpp0.7, zlib1g, libzstd1")
include(CPack)
