# cmake -DINPUT=file -DOUTPUT=file.cc -DHEADER=dir/name.h -DNAMESPACE=ns -DFUNCTION=Name -P embed_file.cmake
# Writes a C++ source defining `std::string_view ns::Name()` (declared in HEADER) that
# returns INPUT's bytes, so a file is built into the binary (nothing is read at run time).
file(READ "${INPUT}" hex HEX)
string(LENGTH "${hex}" n_hex)
math(EXPR n_bytes "${n_hex} / 2")
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "'\\\\x\\1'," bytes "${hex}")
# A line break after each of INPUT's own keeps the generated lines short.
string(REPLACE "'\\x0a'," "'\\x0a',\n" bytes "${bytes}")
file(WRITE "${OUTPUT}.tmp"
  "// Generated from ${INPUT} by cmake/embed_file.cmake; do not edit.\n"
  "#include \"${HEADER}\"\n\n"
  "namespace ${NAMESPACE} {\n"
  "namespace {\n"
  "constexpr char kBytes[] = {\n${bytes}'\\0'};\n"
  "}  // namespace\n"
  "std::string_view ${FUNCTION}() { return std::string_view(kBytes, ${n_bytes}); }\n"
  "}  // namespace ${NAMESPACE}\n")
file(RENAME "${OUTPUT}.tmp" "${OUTPUT}")
