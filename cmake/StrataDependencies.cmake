# Finds every dependency strata builds against and exposes each as one target:
#   MPI::MPI_CXX, strata::kokkos, strata::linalg (OpenBLAS or cuBLAS), strata::dnnl
#   (oneDNN, CPU builds), strata::nccl, strata::sentencepiece,
#   strata::hdf5,
#   toml11::toml11, CLI11::CLI11, Catch2::Catch2, benchmark::benchmark.
# Kokkos is the one scripts/build-kokkos.sh builds from Debian's trilinos source (OpenMP
# for CPU builds, CUDA for GPU builds; the presets pass its Kokkos_ROOT); another Kokkos
# 3.4 or 4.x with the same backend is taken through -DKokkos_ROOT=<prefix>. Debian's own
# Trilinos package is Serial only: a CPU rank would run on one core.

find_package(MPI REQUIRED COMPONENTS C CXX)

find_package(Kokkos REQUIRED)
if(STRATA_ENABLE_CUDA)
  kokkos_check(DEVICES CUDA RETURN_VALUE _kokkos_has_cuda)
  if(NOT _kokkos_has_cuda)
    message(FATAL_ERROR "strata: STRATA_ENABLE_CUDA=ON needs a CUDA-enabled Kokkos: pass -DKokkos_ROOT=<prefix> "
                        "(scripts/build-kokkos.sh cuda builds one from Debian's source)")
  endif()
else()
  kokkos_check(DEVICES OpenMP RETURN_VALUE _kokkos_has_openmp)
  if(NOT _kokkos_has_openmp)
    message(FATAL_ERROR "strata: a CPU build needs an OpenMP-enabled Kokkos (a rank's threads): pass "
                        "-DKokkos_ROOT=<prefix> (scripts/build-kokkos.sh openmp builds one from Debian's source)")
  endif()
endif()

# --- Kokkos core ----------------------------------------------------------------------
# Debian's package exports Kokkos::kokkos with INTERFACE_INCLUDE_DIRECTORIES pointing at
# <config dir>/../../../../include = /usr/lib/include, which does not exist (CMake then
# refuses to configure any consumer), and it omits /usr/include/trilinos where the
# headers are. We keep only include directories that exist and add Kokkos_INCLUDE_DIRS.
function(strata_repair_include_dirs target extra_dirs)
  get_target_property(_dirs ${target} INTERFACE_INCLUDE_DIRECTORIES)
  set(_kept "")
  if(_dirs)
    foreach(_d IN LISTS _dirs)
      if(_d MATCHES "^\\$<" OR EXISTS "${_d}")
        list(APPEND _kept "${_d}")
      else()
        message(STATUS "strata: dropping non-existent include dir '${_d}' from ${target}")
      endif()
    endforeach()
  endif()
  foreach(_d IN LISTS extra_dirs)
    if(EXISTS "${_d}")
      list(APPEND _kept "${_d}")
    endif()
  endforeach()
  list(REMOVE_DUPLICATES _kept)
  set_target_properties(${target} PROPERTIES INTERFACE_INCLUDE_DIRECTORIES "${_kept}")
endfunction()

if(NOT TARGET Kokkos::kokkos)
  message(FATAL_ERROR "strata: find_package(Kokkos) did not define Kokkos::kokkos")
endif()
strata_repair_include_dirs(Kokkos::kokkos "${Kokkos_INCLUDE_DIRS}")
add_library(strata_kokkos INTERFACE)
target_link_libraries(strata_kokkos INTERFACE Kokkos::kokkos)
add_library(strata::kokkos ALIAS strata_kokkos)

# --- dense linear algebra ---------------------------------------------------------------
# CPU builds: OpenBLAS's OpenMP build (Debian: libopenblas-openmp-dev), called through
# CBLAS (kernels/gemm.hpp). Its threads are the rank's OpenMP threads, the same pool as
# Kokkos' and oneDNN's: one thread count for all three (cli/thread_setup), and a product
# called inside a parallel region runs on the calling thread alone. The pthread build
# (Debian's default libopenblas.so.0) keeps a pool of its own, whose spinning threads
# contend with OpenMP's. Both have the soname libopenblas.so.0, so the OpenMP one is linked
# by its full path and found at run time through the RUNPATH (installed too:
# CMAKE_INSTALL_RPATH_USE_LINK_PATH). Another OpenBLAS: -DOPENBLAS_ROOT=<prefix>.
# CUDA builds call cuBLAS.
add_library(strata_linalg INTERFACE)
if(STRATA_ENABLE_CUDA)
  find_package(CUDAToolkit REQUIRED)
  target_link_libraries(strata_linalg INTERFACE strata::kokkos CUDA::cublas CUDA::cudart)
else()
  set(_openblas_hints ${OPENBLAS_ROOT} $ENV{OPENBLAS_ROOT})
  find_path(OPENBLAS_INCLUDE_DIR cblas.h HINTS ${_openblas_hints} PATH_SUFFIXES include
            PATHS /usr/include/${CMAKE_LIBRARY_ARCHITECTURE}/openblas-openmp NO_DEFAULT_PATH)
  find_library(OPENBLAS_LIBRARY openblas HINTS ${_openblas_hints} PATH_SUFFIXES lib lib64
               PATHS /usr/lib/${CMAKE_LIBRARY_ARCHITECTURE}/openblas-openmp NO_DEFAULT_PATH)
  if(NOT OPENBLAS_INCLUDE_DIR OR NOT OPENBLAS_LIBRARY)
    message(FATAL_ERROR "strata: OpenBLAS's OpenMP build not found (cblas.h, libopenblas; Debian: "
                        "libopenblas-openmp-dev, or -DOPENBLAS_ROOT=<prefix>)")
  endif()
  target_include_directories(strata_linalg SYSTEM INTERFACE ${OPENBLAS_INCLUDE_DIR})
  target_link_libraries(strata_linalg INTERFACE ${OPENBLAS_LIBRARY} strata::kokkos)
endif()
add_library(strata::linalg ALIAS strata_linalg)

# --- oneDNN (CPU builds): bf16 matrix products with fp32 accumulation ----------------------
# Debian's libdnnl-dev (oneDNN 2.6); its matmul runs bf16 operands on AVX512-BF16 (or AMX)
# CPUs. CUDA builds take bf16 products from cuBLAS instead and do not link it.
# Found by its header and library, not by its package config: Debian's dnnl-config.cmake
# calls find_package(OpenCL REQUIRED) for a GPU runtime strata never uses, so on a bare
# system (libdnnl-dev only *recommends* ocl-icd-opencl-dev) configure failed. Another
# oneDNN is found through CMAKE_PREFIX_PATH or -DDNNL_ROOT=<prefix>.
add_library(strata_dnnl INTERFACE)
if(NOT STRATA_ENABLE_CUDA)
  find_path(DNNL_INCLUDE_DIR oneapi/dnnl/dnnl.hpp HINTS ${DNNL_ROOT} ENV DNNL_ROOT PATH_SUFFIXES include)
  find_library(DNNL_LIBRARY dnnl HINTS ${DNNL_ROOT} ENV DNNL_ROOT PATH_SUFFIXES lib lib64)
  if(NOT DNNL_INCLUDE_DIR OR NOT DNNL_LIBRARY)
    message(FATAL_ERROR "strata: oneDNN not found (oneapi/dnnl/dnnl.hpp, libdnnl; Debian: libdnnl-dev, "
                        "or -DDNNL_ROOT=<prefix>)")
  endif()
  target_include_directories(strata_dnnl INTERFACE ${DNNL_INCLUDE_DIR})
  target_link_libraries(strata_dnnl INTERFACE ${DNNL_LIBRARY} gomp)  # its OpenMP runtime: threads per rank
  target_compile_definitions(strata_dnnl INTERFACE STRATA_HAVE_DNNL=1)
endif()
add_library(strata::dnnl ALIAS strata_dnnl)

# --- SentencePiece: the subword tokenizer (`strata tokenize`, data.kind = "tokens") --------
# Debian's libsentencepiece-dev (0.1.97): training (libsentencepiece_train) and encoding.
find_package(PkgConfig REQUIRED)
pkg_check_modules(SENTENCEPIECE REQUIRED IMPORTED_TARGET GLOBAL sentencepiece)
add_library(strata::sentencepiece ALIAS PkgConfig::SENTENCEPIECE)

# --- NCCL (CUDA builds): the collective backend for device buffers -------------------------
add_library(strata_nccl INTERFACE)
if(STRATA_ENABLE_CUDA)
  find_path(NCCL_INCLUDE_DIR nccl.h HINTS ${CUDAToolkit_INCLUDE_DIRS} ENV NCCL_HOME PATH_SUFFIXES include)
  find_library(NCCL_LIBRARY nccl HINTS ${CUDAToolkit_LIBRARY_DIR} ENV NCCL_HOME PATH_SUFFIXES lib lib64)
  if(NOT NCCL_INCLUDE_DIR OR NOT NCCL_LIBRARY)
    message(FATAL_ERROR "strata: STRATA_ENABLE_CUDA=ON needs NCCL (nccl.h, libnccl); set NCCL_HOME")
  endif()
  target_include_directories(strata_nccl INTERFACE ${NCCL_INCLUDE_DIR})
  target_link_libraries(strata_nccl INTERFACE ${NCCL_LIBRARY} CUDA::cudart)
  target_compile_definitions(strata_nccl INTERFACE STRATA_HAVE_NCCL=1)
endif()
add_library(strata::nccl ALIAS strata_nccl)

# --- parallel HDF5 -------------------------------------------------------------------------
set(HDF5_PREFER_PARALLEL TRUE)
find_package(HDF5 REQUIRED COMPONENTS C)
if(NOT HDF5_IS_PARALLEL)
  message(FATAL_ERROR "strata: HDF5 found at '${HDF5_INCLUDE_DIRS}' is not the parallel build (Debian: libhdf5-mpich-dev)")
endif()
add_library(strata_hdf5 INTERFACE)
target_include_directories(strata_hdf5 INTERFACE ${HDF5_INCLUDE_DIRS})
target_link_libraries(strata_hdf5 INTERFACE ${HDF5_LIBRARIES} MPI::MPI_C)
target_compile_definitions(strata_hdf5 INTERFACE ${HDF5_DEFINITIONS})
add_library(strata::hdf5 ALIAS strata_hdf5)

# --- config, command line, tests, benchmarks ----------------------------------------------
find_package(toml11 REQUIRED)
find_package(CLI11 REQUIRED)
find_package(ZLIB REQUIRED)  # gzip IDX image files (io/idx_file)
if(STRATA_BUILD_TESTS)
  find_package(Catch2 2 REQUIRED)
endif()
if(STRATA_BUILD_BENCH)
  find_package(benchmark REQUIRED)
endif()

message(STATUS "strata: Kokkos ${Kokkos_VERSION} devices: ${Kokkos_DEVICES}; HDF5 ${HDF5_VERSION} (parallel); MPI ${MPI_CXX_VERSION}")
