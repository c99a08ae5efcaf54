# Finds LLVM/MLIR 19 (Debian packages), CUDA's NVRTC headers and SQLite, with
# an error that says what to install when something is missing.

if(LINA_ENABLE_MLIR)
  if(NOT MLIR_DIR AND EXISTS /usr/lib/llvm-19/lib/cmake/mlir)
    set(MLIR_DIR /usr/lib/llvm-19/lib/cmake/mlir)
  endif()
  find_package(MLIR CONFIG QUIET)
  if(NOT MLIR_FOUND)
    message(FATAL_ERROR
      "MLIR 19 not found. Install it with:\n"
      "  sudo apt-get install llvm-19-dev libmlir-19-dev mlir-19-tools llvm-19-tools\n"
      "or run scripts/install-deps.sh, or pass -DMLIR_DIR=<prefix>/lib/cmake/mlir.")
  endif()
  if(NOT LLVM_VERSION_MAJOR EQUAL 19)
    message(FATAL_ERROR "lina needs LLVM/MLIR 19, found ${LLVM_PACKAGE_VERSION}")
  endif()
  message(STATUS "Using MLIR ${LLVM_PACKAGE_VERSION} from ${MLIR_DIR}")

  list(APPEND CMAKE_MODULE_PATH "${MLIR_CMAKE_DIR}" "${LLVM_CMAKE_DIR}")
  set(LLVM_RUNTIME_OUTPUT_INTDIR ${CMAKE_BINARY_DIR}/bin)
  set(LLVM_LIBRARY_OUTPUT_INTDIR ${CMAKE_BINARY_DIR}/lib)
  set(MLIR_BINARY_DIR ${CMAKE_BINARY_DIR})
  include(TableGen)
  include(AddLLVM)
  include(AddMLIR)
  include(HandleLLVMOptions)
  include_directories(SYSTEM ${LLVM_INCLUDE_DIRS} ${MLIR_INCLUDE_DIRS})
  link_directories(${LLVM_BUILD_LIBRARY_DIR})
  add_definitions(${LLVM_DEFINITIONS})

  if(LINA_STATIC)
    # Debian links every MLIR library against the 129 MB libLLVM.so. Its static
    # component libraries are installed too: swap the dylib for them so the
    # tools need only libc/libstdc++ and run on the GPU machine as they are.
    set(LLVM_LINK_LLVM_DYLIB OFF)
    # LLVMSupport asks for zlib, zstd and z3 as shared libraries; lina uses
    # none of z3 and links the other two statically.
    find_library(LINA_ZSTD_STATIC libzstd.a)
    find_library(LINA_ZLIB_STATIC libz.a)
    if(NOT LINA_ZSTD_STATIC OR NOT LINA_ZLIB_STATIC)
      message(FATAL_ERROR "LINA_STATIC needs libzstd.a and libz.a: "
                          "apt-get install libzstd-dev zlib1g-dev "
                          "(or configure with -DLINA_STATIC=OFF)")
    endif()
    if(TARGET LLVMSupport)
      get_target_property(support_libs LLVMSupport INTERFACE_LINK_LIBRARIES)
      list(FILTER support_libs EXCLUDE REGEX "libz3")
      list(TRANSFORM support_libs REPLACE "^zstd::libzstd_shared$" "${LINA_ZSTD_STATIC}")
      list(TRANSFORM support_libs REPLACE "^ZLIB::ZLIB$" "${LINA_ZLIB_STATIC}")
      set_target_properties(LLVMSupport PROPERTIES INTERFACE_LINK_LIBRARIES "${support_libs}")
    endif()
    add_link_options(-static-libstdc++ -static-libgcc)
    llvm_map_components_to_libnames(LINA_LLVM_STATIC_LIBS
                                    Support Core TableGen Demangle)
    get_property(lina_imported DIRECTORY PROPERTY IMPORTED_TARGETS)
    foreach(tgt ${MLIR_EXPORTED_TARGETS})
      if(TARGET ${tgt})
        get_target_property(libs ${tgt} INTERFACE_LINK_LIBRARIES)
        if(libs)
          list(TRANSFORM libs REPLACE "^LLVM$" "${LINA_LLVM_STATIC_LIBS}")
          set_target_properties(${tgt} PROPERTIES INTERFACE_LINK_LIBRARIES "${libs}")
        endif()
      endif()
    endforeach()
  endif()
endif()

find_package(SQLite3)
if(NOT SQLite3_FOUND)
  message(STATUS "SQLite3 not found (apt-get install libsqlite3-dev): the cache will not be built")
endif()
