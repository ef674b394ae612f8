# Writes OUTPUT, a C++ source defining the web page's files as byte arrays, from the files
# listed in FILES (comma-separated paths relative to BASE). Run by the build (see aggregator/CMakeLists.txt), so
# an edited page is rebuilt into tweetsearchd.
string(REPLACE "," ";" FILES "${FILES}")
set(entries "")
set(arrays "")
set(index 0)
foreach(name IN LISTS FILES)
  file(READ "${BASE}/${name}" hex HEX)
  string(LENGTH "${hex}" hex_length)
  math(EXPR size "${hex_length} / 2")
  string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${hex}")
  string(APPEND arrays "const unsigned char kFile${index}[] = {${bytes}0};\n")
  if(name MATCHES "\\.html$")
    set(type "text/html; charset=utf-8")
  elseif(name MATCHES "\\.css$")
    set(type "text/css; charset=utf-8")
  elseif(name MATCHES "\\.m?js$")
    set(type "text/javascript; charset=utf-8")
  elseif(name MATCHES "\\.svg$")
    set(type "image/svg+xml")
  else()
    set(type "application/octet-stream")
  endif()
  string(APPEND entries
    "  {\"${name}\", \"${type}\", std::string_view(reinterpret_cast<const char*>(kFile${index}), ${size})},\n")
  math(EXPR index "${index} + 1")
endforeach()
file(WRITE "${OUTPUT}.tmp"
"// Generated from web/ by cmake/embed_files.cmake. Do not edit.\n"
"#include \"aggregator/http/web_assets.h\"\n\n"
"namespace tweetsearch::aggregator {\nnamespace {\n\n${arrays}\n}  // namespace\n\n"
"const WebFile kWebFiles[] = {\n${entries}};\n"
"const size_t kWebFileCount = sizeof(kWebFiles) / sizeof(kWebFiles[0]);\n\n"
"}  // namespace tweetsearch::aggregator\n")
file(COPY_FILE "${OUTPUT}.tmp" "${OUTPUT}" ONLY_IF_DIFFERENT)
file(REMOVE "${OUTPUT}.tmp")
