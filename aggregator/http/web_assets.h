// The web page's files (web/: HTML, CSS, JavaScript), built into the binary so that
// tweetsearchd serves its search page and dashboard with no separate server or install step.
#ifndef TWEETSEARCH_AGGREGATOR_HTTP_WEB_ASSETS_H_
#define TWEETSEARCH_AGGREGATOR_HTTP_WEB_ASSETS_H_

#include <cstddef>
#include <string_view>

namespace tweetsearch::aggregator {

struct WebFile {
  std::string_view name;          // path under web/, e.g. "index.html", "assets/search.js"
  std::string_view content_type;  // for the Content-Type header
  std::string_view body;          // the bytes; static storage
};

// Every file, from the generated web_files.cc.
extern const WebFile kWebFiles[];
extern const size_t kWebFileCount;

// The file served at a URL path: "/" is index.html, "/dashboard" dashboard.html, and
// "/assets/..." the files of web/assets/. Null for any other path.
const WebFile* FindWebFile(std::string_view url_path);

}  // namespace tweetsearch::aggregator

#endif  // TWEETSEARCH_AGGREGATOR_HTTP_WEB_ASSETS_H_
