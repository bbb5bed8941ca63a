# Cross build for 64-bit ARM Linux with Debian's gcc-aarch64-linux-gnu, against the private
# sysroot scripts/arm64_sysroot.sh unpacks (build-arm64/sysroot unless UVLLM_ARM64_SYSROOT
# says otherwise). Tests run through qemu-aarch64 (CMAKE_CROSSCOMPILING_EMULATOR); the CPU
# model comes from QEMU_CPU at run time (make test-arm64 runs them under several models).
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
if(DEFINED ENV{UVLLM_ARM64_SYSROOT})
  set(UVLLM_ARM64_SYSROOT $ENV{UVLLM_ARM64_SYSROOT})
elseif(NOT UVLLM_ARM64_SYSROOT)
  set(UVLLM_ARM64_SYSROOT ${CMAKE_CURRENT_LIST_DIR}/../build-arm64/sysroot)
endif()
get_filename_component(UVLLM_ARM64_SYSROOT ${UVLLM_ARM64_SYSROOT} ABSOLUTE)
set(CMAKE_SYSROOT ${UVLLM_ARM64_SYSROOT})
set(CMAKE_FIND_ROOT_PATH ${UVLLM_ARM64_SYSROOT})
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)
# pkg-config reads the sysroot's .pc files and prefixes their paths with it
set(ENV{PKG_CONFIG_LIBDIR}
  "${UVLLM_ARM64_SYSROOT}/usr/lib/aarch64-linux-gnu/pkgconfig:${UVLLM_ARM64_SYSROOT}/usr/share/pkgconfig")
set(ENV{PKG_CONFIG_SYSROOT_DIR} ${UVLLM_ARM64_SYSROOT})
set(ENV{PKG_CONFIG_PATH} "")
# criterion's own dependencies (libgit2, nanomsg, ...) are found through the sysroot
set(CMAKE_EXE_LINKER_FLAGS_INIT
  "-Wl,-rpath-link,${UVLLM_ARM64_SYSROOT}/usr/lib/aarch64-linux-gnu -Wl,-rpath-link,${UVLLM_ARM64_SYSROOT}/lib/aarch64-linux-gnu")
set(CMAKE_CROSSCOMPILING_EMULATOR qemu-aarch64;-L;${UVLLM_ARM64_SYSROOT})
set(UVLLM_CUDA OFF CACHE STRING "no CUDA backend in the arm64 build" FORCE)
