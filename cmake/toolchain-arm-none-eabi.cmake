# Cortex-M with Arm's GNU toolchain (Debian: gcc-arm-none-eabi, libnewlib-arm-none-eabi):
#   cmake -S . -B build-m4 -DCMAKE_TOOLCHAIN_FILE=cmake/toolchain-arm-none-eabi.cmake \
#         -DETCH_MCU_CPU=cortex-m4 -DETCH_BOARD=mps2-an386
# ETCH_MCU_CPU picks the core and its floating-point unit (hard-float ABI throughout):
#   cortex-m4   -mfpu=fpv4-sp-d16 (single precision)      board mps2-an386
#   cortex-m7   -mfpu=fpv5-d16    (double precision)      board mps2-an500
#   cortex-m55  -mfpu=auto: FPU + MVE (Helium) from -mcpu  board mps3-an547
# Code is built -Os with a section per function and per object (--gc-sections drops what the
# firmware never calls), against newlib-nano. ETCH_FREESTANDING is forced on.
set(CMAKE_SYSTEM_NAME Generic)
set(CMAKE_SYSTEM_PROCESSOR arm)
set(CMAKE_C_COMPILER arm-none-eabi-gcc)
set(CMAKE_ASM_COMPILER arm-none-eabi-gcc)
set(CMAKE_AR arm-none-eabi-ar CACHE FILEPATH "")
set(CMAKE_RANLIB arm-none-eabi-ranlib CACHE FILEPATH "")
set(CMAKE_OBJCOPY arm-none-eabi-objcopy CACHE FILEPATH "")
set(CMAKE_SIZE arm-none-eabi-size CACHE FILEPATH "")
# The compiler check links no program (there is no board yet when it runs).
set(CMAKE_TRY_COMPILE_TARGET_TYPE STATIC_LIBRARY)

set(ETCH_MCU_CPU cortex-m4 CACHE STRING "Cortex-M core: cortex-m4, cortex-m7 or cortex-m55")
set_property(CACHE ETCH_MCU_CPU PROPERTY STRINGS cortex-m4 cortex-m7 cortex-m55)
if(ETCH_MCU_CPU STREQUAL "cortex-m4")
  set(_etch_cpu "-mcpu=cortex-m4 -mfpu=fpv4-sp-d16 -mfloat-abi=hard")
elseif(ETCH_MCU_CPU STREQUAL "cortex-m7")
  set(_etch_cpu "-mcpu=cortex-m7 -mfpu=fpv5-d16 -mfloat-abi=hard")
elseif(ETCH_MCU_CPU STREQUAL "cortex-m55")
  # -fno-if-conversion2: GCC 12.2 puts f32<->f64 VCVTs under an IT block for this core
  # (vcvtne.f64.f32), which binutils rejects for Armv8.1-M; post-reload if-conversion is
  # what makes them conditional.
  set(_etch_cpu "-mcpu=cortex-m55 -mfpu=auto -mfloat-abi=hard -fno-if-conversion2")
else()
  message(FATAL_ERROR "ETCH_MCU_CPU=${ETCH_MCU_CPU}: expected cortex-m4, cortex-m7 or cortex-m55")
endif()
set(ETCH_MCU_FLAGS "-mthumb ${_etch_cpu}")

# arm-none-eabi-gcc types int32_t/uint32_t as long, where every hosted ABI etch builds for has
# int: etch prints them with %d/%u (warnings are errors, -Wformat included). In the AAPCS int
# and long are the same 32-bit type (size, alignment, registers), and C has no type mangling,
# so the two typedefs are made int; newlib's <inttypes.h> follows (PRIu32 is "u" then), and the
# prebuilt newlib links unchanged.
set(ETCH_MCU_INT32 "-U__INT32_TYPE__ -D__INT32_TYPE__=int -U__UINT32_TYPE__ '-D__UINT32_TYPE__=unsigned int' -U__INT_LEAST32_TYPE__ -D__INT_LEAST32_TYPE__=int -U__UINT_LEAST32_TYPE__ '-D__UINT_LEAST32_TYPE__=unsigned int'")
set(CMAKE_C_FLAGS_INIT "${ETCH_MCU_FLAGS} ${ETCH_MCU_INT32} -ffunction-sections -fdata-sections")
set(CMAKE_ASM_FLAGS_INIT "${ETCH_MCU_FLAGS}")
# -Os for every build type that optimizes (CMake's Release default would add -O3).
set(CMAKE_C_FLAGS_RELEASE "-Os -DNDEBUG" CACHE STRING "" FORCE)
set(CMAKE_C_FLAGS_MINSIZEREL "-Os -DNDEBUG" CACHE STRING "" FORCE)
# newlib-nano: its printf family lacks %zu and %ll, which etch's error messages use, so the
# firmware links its own snprintf/vsnprintf (firmware/common/fw_printf.c) before libc.
set(CMAKE_EXE_LINKER_FLAGS_INIT "${ETCH_MCU_FLAGS} --specs=nano.specs -Wl,--gc-sections")

set(ETCH_FREESTANDING ON CACHE BOOL "" FORCE)

set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
