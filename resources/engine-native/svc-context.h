// svc-desktop's own code in node-llama-cpp's addon: what AddonContext holds for it (resources/engine-native;
// included by AddonContext.h through addon-hooks.patch).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>

namespace svc {

// A solo run's shared state (solo-loop.cpp): how far the generation has asked, and whether to stop.
struct SoloRun {
    std::mutex mutex;
    std::condition_variable cv;
    int32_t asked = 1;
    int32_t allow = 1;
    bool stop = false;
    bool active = true;
};

}  // namespace svc
