# The torch side: comm, runtime, parallel, nn, data, pipeline, train, as one target
# baton_torch. The torch-free target baton_base never links LibTorch.
include(${CMAKE_CURRENT_LIST_DIR}/torch_wheel.cmake)
baton_prefer_wheel_c10()
find_package(Torch QUIET)
if(NOT Torch_FOUND)
  message(WARNING "LibTorch not found: building the torch-free part only")
  return()
endif()
# Debian's Gloo headers live in /usr/include; c10d's ProcessGroupGloo needs them.
find_path(GLOO_INCLUDE_DIR gloo/config.h)
file(GLOB BATON_TORCH_SOURCES CONFIGURE_DEPENDS
  baton/comm/*.cpp baton/runtime/*.cpp baton/parallel/*.cpp
  baton/nn/*.cpp baton/data/*.cpp baton/pipeline/*.cpp baton/train/*.cpp)
foreach(unit ${BATON_TORCH_FREE_UNITS})
  list(FILTER BATON_TORCH_SOURCES EXCLUDE REGEX "/${unit}$")
endforeach()
# CUDA-only sources end in _cuda.cpp and build only against a CUDA LibTorch.
if(NOT TORCH_CUDA_LIBRARIES AND NOT CUDA_FOUND)
  list(FILTER BATON_TORCH_SOURCES EXCLUDE REGEX "_cuda\\.cpp$")
else()
  list(FILTER BATON_TORCH_SOURCES EXCLUDE REGEX "_nocuda\\.cpp$")
endif()
if(NOT BATON_TORCH_SOURCES)
  return()
endif()
add_library(baton_torch STATIC ${BATON_TORCH_SOURCES})
baton_wheel_link_options(baton_torch INTERFACE)
add_library(baton::torch ALIAS baton_torch)
set_target_properties(baton_torch PROPERTIES EXPORT_NAME torch)
target_link_libraries(baton_torch PUBLIC baton_base ${TORCH_LIBRARIES})
# Installed, the torch target carries its include folders; batonConfig.cmake
# finds Gloo's headers again on the user's machine.
target_include_directories(baton_torch PUBLIC $<BUILD_INTERFACE:${CMAKE_CURRENT_SOURCE_DIR}>
                                              "$<BUILD_INTERFACE:${TORCH_INCLUDE_DIRS}>")
if(GLOO_INCLUDE_DIR)
  target_include_directories(baton_torch PUBLIC $<BUILD_INTERFACE:${GLOO_INCLUDE_DIR}>)
endif()
# One precompiled torch header, reused by every torch test and the CLI.
target_precompile_headers(baton_torch PRIVATE <torch/torch.h>)
# baton/data decompresses the Fashion-MNIST .gz files with zlib.
target_link_libraries(baton_torch PRIVATE z)

# comm_peer: one rank of the multi-process tests in tests/comm/process_test.cpp,
# which finds it next to itself in tests/.
if(BATON_BUILD_TESTS)
  add_executable(comm_peer tests/comm/peer_main.cpp)
  target_link_libraries(comm_peer PRIVATE baton_torch)
  target_precompile_headers(comm_peer REUSE_FROM baton_torch)
  set_target_properties(comm_peer PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tests)
  function(baton_comm_peer_dependency)
    if(TARGET comm_process_test)
      add_dependencies(comm_process_test comm_peer)
    endif()
  endfunction()
  cmake_language(DEFER CALL baton_comm_peer_dependency)
endif()
