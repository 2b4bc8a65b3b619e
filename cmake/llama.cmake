# Imported targets for llama.cpp, built outside this repository.
#   hearth::llama        libllama + ggml (include/llama.h, ggml headers)
#   hearth::llama_common llama.cpp's common library (chat templates, output parsers),
#                        with its vendored nlohmann::json and cpp-httplib.
# hearth uses the JSON and HTTP libraries that llama-common itself is built with: two
# versions of either in one process would break the one-definition rule.

set(HEARTH_LLAMA_PREFIX "" CACHE PATH "Prefix made by scripts/build-llama.sh (src/ and build/)")
set(HEARTH_LLAMA_DIR "" CACHE PATH "llama.cpp source tree")
set(HEARTH_LLAMA_BUILD_DIR "" CACHE PATH "llama.cpp build tree (BUILD_SHARED_LIBS=ON, LLAMA_BUILD_COMMON=ON)")

if(HEARTH_LLAMA_PREFIX)
  set(HEARTH_LLAMA_DIR "${HEARTH_LLAMA_PREFIX}/src")
  set(HEARTH_LLAMA_BUILD_DIR "${HEARTH_LLAMA_PREFIX}/build")
endif()
if(NOT HEARTH_LLAMA_DIR OR NOT HEARTH_LLAMA_BUILD_DIR)
  message(FATAL_ERROR "hearth: llama.cpp not found. Run `make` (which calls scripts/build-llama.sh), "
                      "or pass -DHEARTH_LLAMA_PREFIX=... or -DHEARTH_LLAMA_DIR=... -DHEARTH_LLAMA_BUILD_DIR=...")
endif()

# Another llama.cpp build than at the last configure (another backend: scripts/configure.sh
# reconfigures for it): the libraries found in the old one must be looked up again.
if(DEFINED HEARTH_LLAMA_BUILD_DIR_USED AND NOT HEARTH_LLAMA_BUILD_DIR_USED STREQUAL HEARTH_LLAMA_BUILD_DIR)
  message(STATUS "hearth: llama.cpp changed from ${HEARTH_LLAMA_BUILD_DIR_USED} to ${HEARTH_LLAMA_BUILD_DIR}")
  unset(HEARTH_HTTPLIB_A CACHE)
  unset(HEARTH_COMMON_BASE_A CACHE)
endif()
set(HEARTH_LLAMA_BUILD_DIR_USED "${HEARTH_LLAMA_BUILD_DIR}" CACHE INTERNAL "the llama.cpp build configured against")
# Its backends, from its own cache, for the log.
set(HEARTH_LLAMA_BACKENDS "")
if(EXISTS "${HEARTH_LLAMA_BUILD_DIR}/CMakeCache.txt")
  foreach(_backend CUDA METAL VULKAN RPC)
    file(STRINGS "${HEARTH_LLAMA_BUILD_DIR}/CMakeCache.txt" _on REGEX "^GGML_${_backend}:BOOL=ON$")
    if(_on)
      list(APPEND HEARTH_LLAMA_BACKENDS ${_backend})
    endif()
  endforeach()
endif()
if(NOT HEARTH_LLAMA_BACKENDS)
  set(HEARTH_LLAMA_BACKENDS CPU)
endif()
message(STATUS "hearth: llama.cpp in ${HEARTH_LLAMA_BUILD_DIR} (${HEARTH_LLAMA_BACKENDS})")

set(_lb "${HEARTH_LLAMA_BUILD_DIR}/bin")
foreach(_lib llama ggml ggml-base llama-common)
  if(NOT EXISTS "${_lb}/lib${_lib}.so" AND NOT EXISTS "${_lb}/lib${_lib}.dylib")
    message(FATAL_ERROR "hearth: ${_lb}/lib${_lib}.so missing; build llama.cpp with scripts/build-llama.sh")
  endif()
endforeach()

function(hearth_import_shared name file)
  add_library(${name} SHARED IMPORTED GLOBAL)
  if(EXISTS "${_lb}/${file}.dylib")
    set_target_properties(${name} PROPERTIES IMPORTED_LOCATION "${_lb}/${file}.dylib")
  else()
    set_target_properties(${name} PROPERTIES IMPORTED_LOCATION "${_lb}/${file}.so")
  endif()
endfunction()

hearth_import_shared(hearth_ggml_base libggml-base)
hearth_import_shared(hearth_ggml libggml)
hearth_import_shared(hearth_llama_lib libllama)
hearth_import_shared(hearth_llama_common_lib libllama-common)

add_library(hearth::llama INTERFACE IMPORTED GLOBAL)
target_include_directories(hearth::llama SYSTEM INTERFACE
  "${HEARTH_LLAMA_DIR}/include" "${HEARTH_LLAMA_DIR}/ggml/include")
target_link_libraries(hearth::llama INTERFACE hearth_llama_lib hearth_ggml hearth_ggml_base)

# Vendored header-only JSON, and the HTTP library compiled by llama.cpp's build.
add_library(hearth::json INTERFACE IMPORTED GLOBAL)
target_include_directories(hearth::json SYSTEM INTERFACE "${HEARTH_LLAMA_DIR}/vendor")

find_library(HEARTH_HTTPLIB_A NAMES cpp-httplib PATHS "${HEARTH_LLAMA_BUILD_DIR}/vendor/cpp-httplib"
             NO_DEFAULT_PATH REQUIRED)
add_library(hearth::httplib STATIC IMPORTED GLOBAL)
set_target_properties(hearth::httplib PROPERTIES IMPORTED_LOCATION "${HEARTH_HTTPLIB_A}")
target_include_directories(hearth::httplib SYSTEM INTERFACE "${HEARTH_LLAMA_DIR}/vendor/cpp-httplib")

find_library(HEARTH_COMMON_BASE_A NAMES llama-common-base PATHS "${HEARTH_LLAMA_BUILD_DIR}/common"
             NO_DEFAULT_PATH REQUIRED)
add_library(hearth::llama_common INTERFACE IMPORTED GLOBAL)
target_include_directories(hearth::llama_common SYSTEM INTERFACE "${HEARTH_LLAMA_DIR}/common")
target_link_libraries(hearth::llama_common INTERFACE
  hearth_llama_common_lib "${HEARTH_COMMON_BASE_A}" hearth::llama hearth::json)

set(HEARTH_LLAMA_BIN "${_lb}" CACHE INTERNAL "llama.cpp tools (llama-server, llama-cli, llama-bench)")
set(HEARTH_LLAMA_MODELS "${HEARTH_LLAMA_DIR}/models" CACHE INTERNAL "vocab files and chat templates")
