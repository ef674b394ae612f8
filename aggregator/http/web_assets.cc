#include "aggregator/http/web_assets.h"

namespace tweetsearch::aggregator {

const WebFile* FindWebFile(std::string_view url_path) {
  std::string_view name;
  if (url_path == "/" || url_path == "/index.html") {
    name = "index.html";
  } else if (url_path == "/dashboard" || url_path == "/dashboard.html") {
    name = "dashboard.html";
  } else if (url_path.starts_with("/assets/")) {
    name = url_path.substr(1);
  } else {
    return nullptr;
  }
  for (size_t i = 0; i < kWebFileCount; ++i) {
    if (kWebFiles[i].name == name) return &kWebFiles[i];
  }
  return nullptr;
}

}  // namespace tweetsearch::aggregator
