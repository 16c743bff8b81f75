# The torch side: comm, runtime, parallel, nn, data, train. Filled in by the
# runtime issue; the torch-free target above never links it.
find_package(Torch QUIET)
if(NOT Torch_FOUND)
  message(WARNING "LibTorch not found: building the torch-free part only")
  return()
endif()
file(GLOB BATON_TORCH_SOURCES CONFIGURE_DEPENDS
  baton/comm/*.cpp baton/runtime/*.cpp baton/parallel/*.cpp
  baton/nn/*.cpp baton/data/*.cpp baton/train/*.cpp)
if(BATON_TORCH_SOURCES)
  add_library(baton_torch STATIC ${BATON_TORCH_SOURCES})
  target_link_libraries(baton_torch PUBLIC baton_base ${TORCH_LIBRARIES})
  target_include_directories(baton_torch PUBLIC ${CMAKE_CURRENT_SOURCE_DIR})
endif()
