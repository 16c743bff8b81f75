# cmake --install build --prefix P: the headers, one static library per
# module (libbaton_core.a, ..., libbaton_train.a), the baton CLI (and
# baton-train, which `baton train` runs, in a LibTorch build), and
# P/lib/cmake/baton/batonConfig.cmake exporting the umbrella targets
# baton::base (no LibTorch) and baton::torch, for find_package(baton). See
# examples/cpp and scripts/examples.sh.
include(CMakePackageConfigHelpers)

set(BATON_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/baton)
set(_baton_targets baton_base ${BATON_BASE_LIBRARIES})
if(TARGET baton_torch)
  list(APPEND _baton_targets baton_torch ${BATON_TORCH_LIBRARIES})
  set(BATON_HAS_TORCH ON)
else()
  set(BATON_HAS_TORCH OFF)
endif()

install(TARGETS ${_baton_targets} EXPORT batonTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(TARGETS baton RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
if(TARGET baton-train)
  install(TARGETS baton-train RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
endif()

# Headers of every module; without the torch target, only the torch-free ones.
set(_baton_excluded)
if(NOT BATON_HAS_TORCH)
  foreach(module ${BATON_TORCH_MODULES})
    list(APPEND _baton_excluded PATTERN ${module} EXCLUDE)
  endforeach()
endif()
install(DIRECTORY baton/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/baton
        FILES_MATCHING PATTERN "*.h" ${_baton_excluded})

install(EXPORT batonTargets NAMESPACE baton:: DESTINATION ${BATON_CMAKE_DIR})
configure_package_config_file(cmake/batonConfig.cmake.in ${CMAKE_CURRENT_BINARY_DIR}/batonConfig.cmake
                              INSTALL_DESTINATION ${BATON_CMAKE_DIR})
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/batonConfigVersion.cmake
                                 VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_CURRENT_SOURCE_DIR}/cmake/torch_wheel.cmake
              ${CMAKE_CURRENT_BINARY_DIR}/batonConfig.cmake
              ${CMAKE_CURRENT_BINARY_DIR}/batonConfigVersion.cmake
        DESTINATION ${BATON_CMAKE_DIR})
