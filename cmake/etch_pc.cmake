# Writes etch.pc for the prefix being installed to. Run at install time (CMakeLists.txt,
# install(CODE)), where CMAKE_INSTALL_PREFIX is the prefix of this install, `--prefix` included;
# DESTDIR is not part of it (the file describes where the library will live).
# In: ETCH_PC_IN, ETCH_PC_OUT, ETCH_PC_LIBDIR, ETCH_PC_INCLUDEDIR (relative to the prefix, or
# absolute), ETCH_PC_VERSION.
set(ETCH_PC_PREFIX "${CMAKE_INSTALL_PREFIX}")
if(IS_ABSOLUTE "${ETCH_PC_LIBDIR}")
  set(ETCH_PC_LIBDIR_FULL "${ETCH_PC_LIBDIR}")
else()
  set(ETCH_PC_LIBDIR_FULL "\${exec_prefix}/${ETCH_PC_LIBDIR}")
endif()
if(IS_ABSOLUTE "${ETCH_PC_INCLUDEDIR}")
  set(ETCH_PC_INCLUDEDIR_FULL "${ETCH_PC_INCLUDEDIR}")
else()
  set(ETCH_PC_INCLUDEDIR_FULL "\${prefix}/${ETCH_PC_INCLUDEDIR}")
endif()
configure_file("${ETCH_PC_IN}" "${ETCH_PC_OUT}" @ONLY)
