# ul_cpu: like ul_module(cpu ...) but the SIMD kernel files get their ISA flags, so one
# binary carries every path and isa.c picks one at run time.
# The kernel files of the other architecture are left out (kernels_avx*.c on ARM,
# kernels_neon*.c on x86); isa.c, ops.c and pack.c name only the tables of the target's.
file(GLOB _cpu_srcs CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/src/cpu/*.c)
if(CMAKE_SYSTEM_PROCESSOR MATCHES "^(aarch64|arm64|ARM64)$")
  set(UVLLM_CPU_ARM64 ON)
  list(FILTER _cpu_srcs EXCLUDE REGEX "/kernels_avx[^/]*\\.c$")
else()
  set(UVLLM_CPU_ARM64 OFF)
  list(FILTER _cpu_srcs EXCLUDE REGEX "/kernels_neon[^/]*\\.c$")
endif()
add_library(ul_cpu STATIC ${_cpu_srcs})
target_include_directories(ul_cpu PUBLIC ${CMAKE_SOURCE_DIR}/include ${CMAKE_SOURCE_DIR}/src)
target_link_libraries(ul_cpu PUBLIC ul_engine ul_model ul_base)
file(GLOB _cpu_avx2 CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/src/cpu/kernels_avx2*.c)
set_source_files_properties(${_cpu_avx2} PROPERTIES
  COMPILE_OPTIONS "-mavx2;-mfma;-mf16c;-O3")
file(GLOB _cpu_avx512 CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/src/cpu/kernels_avx512*.c)
set_source_files_properties(${_cpu_avx512} PROPERTIES
  COMPILE_OPTIONS "-mavx2;-mfma;-mf16c;-mavx512f;-mavx512bw;-mavx512vl;-mavx512dq;-mavx512vnni;-mavx512bf16;-O3")
# AArch64: NEON is baseline; the dot-product (sdot) and int8 matrix-multiply (smmla)
# files get those extensions, and isa.c only calls them when HWCAP says the CPU has them.
file(GLOB _cpu_neon CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/src/cpu/kernels_neon*.c)
set_source_files_properties(${_cpu_neon} PROPERTIES COMPILE_OPTIONS "-O3")
file(GLOB _cpu_dotprod CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/src/cpu/kernels_neon_dotprod*.c)
set_source_files_properties(${_cpu_dotprod} PROPERTIES
  COMPILE_OPTIONS "-march=armv8.2-a+dotprod+fp16;-O3")
file(GLOB _cpu_i8mm CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/src/cpu/kernels_neon_i8mm*.c)
set_source_files_properties(${_cpu_i8mm} PROPERTIES
  COMPILE_OPTIONS "-march=armv8.2-a+dotprod+i8mm+fp16;-O3")
if(UVLLM_CPU_ARM64)
  # no fused multiply-add where the C says a multiply and an add: the scalar reference then
  # rounds as on x86 (whose baseline has no FMA) and as llama.cpp's quantisers do
  target_compile_options(ul_cpu PRIVATE -ffp-contract=off)
endif()
if(UVLLM_TSAN)
  # ThreadSanitizer looks for races in the threads' synchronisation (the pool, its jobs'
  # partitions in matmul.c, ops.c and forward*.c, the worker, the scheduler, the server),
  # which stays instrumented. The SIMD and scalar kernels only read their inputs and write
  # the rows they are given; instrumented, every vector load became a range check and a
  # TSan-built forward pass ran ~50x slower than Release (an SDK test's 300-token answer
  # took 109 s), so they are compiled without it. ASan still checks their every access.
  # The row quantisers, converters and the weight packer (quant*.c, fp16.c, pack.c; no
  # threads) are the same kind of code, rows in and rows out: instrumented, they were a
  # fifth of unit_cpu's time under TSan (its packed layout checks dequantise every weight
  # row for their float64 references; every golden model packs its weights).
  file(GLOB _cpu_kernels CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/src/cpu/kernels_*.c
    ${CMAKE_SOURCE_DIR}/src/cpu/quant*.c ${CMAKE_SOURCE_DIR}/src/cpu/fp16.c
    ${CMAKE_SOURCE_DIR}/src/cpu/pack.c)
  set_property(SOURCE ${_cpu_kernels} APPEND PROPERTY COMPILE_OPTIONS -fno-sanitize=thread)
endif()
