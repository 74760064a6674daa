# The version of the tvm package's runtime library for find_package(tvm_ffi <version> CONFIG):
# compatible with requests of the same major.minor and an older or equal patch.
set(PACKAGE_VERSION "0.1.0")
if(PACKAGE_FIND_VERSION VERSION_GREATER PACKAGE_VERSION)
  set(PACKAGE_VERSION_COMPATIBLE FALSE)
elseif(PACKAGE_FIND_VERSION_MAJOR STREQUAL "0" AND PACKAGE_FIND_VERSION_MINOR STREQUAL "1")
  set(PACKAGE_VERSION_COMPATIBLE TRUE)
  if(PACKAGE_FIND_VERSION STREQUAL PACKAGE_VERSION)
    set(PACKAGE_VERSION_EXACT TRUE)
  endif()
else()
  set(PACKAGE_VERSION_COMPATIBLE FALSE)
endif()
