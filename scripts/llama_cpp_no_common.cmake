# Leaves llama.cpp's `common` library out of the llama-cpp-python build (scripts/install.sh passes it as
# CMAKE_PROJECT_llama.cpp_INCLUDE, which CMake runs right after llama.cpp's project() call).
# llama-cpp-python forces LLAMA_BUILD_COMMON on before it adds llama.cpp, so -DLLAMA_BUILD_COMMON=OFF
# alone does not hold; here it is set after that, before llama.cpp reads the option. The Python package
# loads libllama and libggml only: `common` (the tools' helpers, chat templates and an HTTP client,
# cpp-httplib) is compiled and shipped but never loaded, and it was about half of the build's CPU time.
set(LLAMA_BUILD_COMMON OFF CACHE BOOL "llama: build common utils library" FORCE)
