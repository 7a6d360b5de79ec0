// svc-desktop's own code in node-llama-cpp's addon: a thread pool kept for each context's life.
// `svc engine build` copies this folder (resources/engine-native) into the addon's source as llama/addon/svc/,
// where node-llama-cpp's CMake build compiles it with the addon's own files; resources/engine-patches/
// addon-hooks.patch adds only declarations and call sites to AddonContext.{cpp,h}. docs/architecture.md,
// "Native code".
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>
#include "llama.h"
#include "../addonGlobals.h"
#include "../AddonModel.h"
#include "../AddonSampler.h"
#include "../AddonContext.h"
#include "ggml-backend.h"
#include "ggml-cpu.h"

// Without a thread pool attached, llama.cpp's CPU backend
// starts and joins its worker threads for every decode when built without OpenMP, as node-llama-cpp's
// binaries are. So each context gets a pool, kept for its life and grown when given more threads, attached
// for the decodes that use more than one thread (one-thread decodes start no threads, and leave the pool's
// workers asleep). The decodes of one context never run at the same time: this runs on the decoding thread.
// After a decode the workers sleep until the next one (poll level 0 of ggml's 0 to 100): between two
// tokens the core is free for the JavaScript thread, the client and other processes (docs/performance.md,
// section 16); SVC_GGML_POLL sets another level (1, a few milliseconds of spinning; 50, llama.cpp's own).
void AddonContext::ensureThreadpool() {
    if (ctx == nullptr) {
        return;
    }

    const int32_t threads = std::max(llama_n_threads(ctx), llama_n_threads_batch(ctx));
    if (threads <= 1) {
        if (threadpoolAttached) {
            llama_detach_threadpool(ctx);
            threadpoolAttached = false;
        }
        return;
    }

    if (threads > threadpoolThreads) {
        ggml_backend_dev_t cpuDevice = ggml_backend_dev_by_type(GGML_BACKEND_DEVICE_TYPE_CPU);
        if (cpuDevice == nullptr) {
            return;
        }

        ggml_backend_reg_t reg = ggml_backend_dev_backend_reg(cpuDevice);
        auto* newPool = (decltype(ggml_threadpool_new)*) ggml_backend_reg_get_proc_address(reg, "ggml_threadpool_new");
        auto* freePool = (decltype(ggml_threadpool_free)*) ggml_backend_reg_get_proc_address(reg, "ggml_threadpool_free");
        if (newPool == nullptr || freePool == nullptr) {
            return;
        }

        ggml_threadpool_params params = ggml_threadpool_params_default(threads);
        params.poll = 0;
        const char* poll = std::getenv("SVC_GGML_POLL");
        if (poll != nullptr && poll[0] != '\0') {
            params.poll = (uint32_t) std::max(0, std::min(100, std::atoi(poll)));
        }

        ggml_threadpool* pool = newPool(&params);
        if (pool == nullptr) {
            return;
        }

        if (threadpool != nullptr) {
            llama_detach_threadpool(ctx);
            threadpoolFree(threadpool);
        }

        threadpool = pool;
        threadpoolThreads = threads;
        threadpoolFree = freePool;
        threadpoolAttached = false;
    }

    if (!threadpoolAttached) {
        llama_attach_threadpool(ctx, threadpool, threadpool);
        threadpoolAttached = true;
    }
}

// Frees the context's pool after llama_free (AddonContext::disposeMemory).
void AddonContext::freeThreadpool() {
    if (threadpool != nullptr) {
        threadpoolFree(threadpool);
        threadpool = nullptr;
        threadpoolThreads = 0;
        threadpoolAttached = false;
    }
}
