// The web page hearth serves at `/` (src/web/index.html): one HTML file with its script
// and styles inline, built into the binary at build time (cmake/embed_file.cmake), so it
// works offline and fetches nothing but hearth's own API.
//
// Thread safety: the bytes are constant; any thread.
#pragma once

#include <string_view>

namespace hearth::web {

// index.html's bytes (UTF-8), valid for the whole run.
std::string_view IndexHtml();

// The Content-Security-Policy the page is served with: its inline script and styles,
// and requests to its own origin only.
inline constexpr const char* kContentSecurityPolicy =
    "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; connect-src 'self'; "
    "img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

}  // namespace hearth::web
