# ul_cpu: like ul_module(cpu ...) but the SIMD kernel files get their ISA flags, so one
# binary carries every path and isa.c picks one at run time.
file(GLOB _cpu_srcs CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/src/cpu/*.c)
add_library(ul_cpu STATIC ${_cpu_srcs})
target_include_directories(ul_cpu PUBLIC ${CMAKE_SOURCE_DIR}/include ${CMAKE_SOURCE_DIR}/src)
target_link_libraries(ul_cpu PUBLIC ul_engine ul_model ul_base)
file(GLOB _cpu_avx2 CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/src/cpu/kernels_avx2*.c)
set_source_files_properties(${_cpu_avx2} PROPERTIES
  COMPILE_OPTIONS "-mavx2;-mfma;-mf16c;-O3")
file(GLOB _cpu_avx512 CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/src/cpu/kernels_avx512*.c)
set_source_files_properties(${_cpu_avx512} PROPERTIES
  COMPILE_OPTIONS "-mavx2;-mfma;-mf16c;-mavx512f;-mavx512bw;-mavx512vl;-mavx512dq;-mavx512vnni;-mavx512bf16;-O3")
