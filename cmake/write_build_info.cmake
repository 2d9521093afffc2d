# Writes the build hash into build_info.cc at every build (not only at
# configure time, when it went stale: device run 101 recorded a hash from
# weeks of commits before). configure_file rewrites the file only when the
# hash changed, so an unchanged tree rebuilds nothing.
#   cmake -DSOURCE_DIR=... -DTEMPLATE=... -DOUTPUT=... -P write_build_info.cmake
execute_process(
  COMMAND git describe --always --dirty --abbrev=12
  WORKING_DIRECTORY ${SOURCE_DIR}
  OUTPUT_VARIABLE MOETUNE_BUILD_HASH
  OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
if(NOT MOETUNE_BUILD_HASH)
  set(MOETUNE_BUILD_HASH "unknown")
endif()
configure_file(${TEMPLATE} ${OUTPUT} @ONLY)
