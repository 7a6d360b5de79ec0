// svc-desktop's own code in node-llama-cpp's addon: a step's decode and its samplings in one job.
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
#include "context-job.h"

// A step's decode and the samplings of its tokens in one job. With
// node-llama-cpp's binding a step takes a trip through the libuv pool and back to JavaScript for the decode,
// then one for each sampling: between two decodes of several sequences generating together, the pool
// thread and the JavaScript thread wake up two times more than the work needs. Here the job that decodes
// the batch samples each listed logit with its sampler right after (the settings JavaScript applied to the
// sampler), as llama-server's slot loop does, and resolves with the tokens (-1 where sampling failed).
class AddonContextDecodeAndSampleWorker : public svc::ContextJob {
    public:
        std::vector<int32_t> logitIndexes;
        std::vector<AddonSampler*> samplers;
        std::vector<int32_t> tokens;

        AddonContextDecodeAndSampleWorker(const Napi::Env& env, AddonContext* ctx, std::vector<int32_t> logitIndexes, std::vector<AddonSampler*> samplers)
            : svc::ContextJob(env, "AddonContextDecodeAndSampleWorker", ctx),
              logitIndexes(std::move(logitIndexes)),
              samplers(std::move(samplers)) {
            for (auto* sampler : this->samplers) {
                sampler->Ref();
            }
        }
        ~AddonContextDecodeAndSampleWorker() override {
            for (auto* sampler : samplers) {
                sampler->Unref();
            }
        }

    protected:
        void Execute() {
            try {
                ctx->sharedSamplerData.gotLogit = false;
                ctx->sharedSamplerData.hasLogits = false;

                ctx->ensureThreadpool();

                int r = llama_decode(ctx->ctx, ctx->batch);
                if (r != 0) {
                    SetError(r == 1
                        ? "could not find a KV slot for the batch (try reducing the size of the batch or increase the context)"
                        : "Eval has failed");
                    return;
                }
                llama_synchronize(ctx->ctx);

                tokens.assign(logitIndexes.size(), -1);
                for (size_t i = 0; i < logitIndexes.size(); i++) {
                    AddonSampler* sampler = samplers[i];
                    sampler->rebuildChainIfNeeded();

                    std::unique_lock<std::mutex> samplingLock(ctx->sharedSamplerData.mutex);
                    if (!ctx->sharedSamplerData.gotLogit) {
                        ctx->sharedSamplerData.hasLogits = llama_get_logits(ctx->ctx) != nullptr;
                        ctx->sharedSamplerData.gotLogit = true;
                    }
                    if (!ctx->sharedSamplerData.hasLogits) {
                        SetError("This model does not support token generation");
                        return;
                    }

                    llama_token_data_array cur_p;
                    sampler->sampleAndReleaseLock(ctx->sharedSamplerData.mutex, samplingLock, ctx->ctx, logitIndexes[i], cur_p, false);
                    if (cur_p.size == 0 || !(cur_p.selected >= 0 && cur_p.selected < (int32_t) cur_p.size)) {
                        continue;
                    }

                    const llama_token token = cur_p.data[cur_p.selected].id;
                    sampler->acceptToken(token);
                    tokens[i] = token;
                }
            } catch (const std::exception& e) {
                SetError(e.what());
            } catch(...) {
                SetError("Unknown error when calling \"llama_decode\" or sampling");
            }
        }
        void OnOK() {
            Napi::Array result = Napi::Array::New(Env(), tokens.size());
            for (size_t i = 0; i < tokens.size(); i++) {
                result.Set((uint32_t) i, Napi::Number::New(Env(), tokens[i]));
            }
            deferred.Resolve(result);
        }
};

Napi::Value AddonContext::DecodeBatchAndSample(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    if (info.Length() < 2 || !info[0].IsTypedArray() || !info[1].IsArray()) {
        Napi::TypeError::New(env, "decodeBatchAndSample(logitIndexes: Uint32Array, samplers: AddonSampler[])").ThrowAsJavaScriptException();
        return env.Undefined();
    }
    const Napi::Uint32Array indexArray = info[0].As<Napi::Uint32Array>();
    const Napi::Array samplerArray = info[1].As<Napi::Array>();
    if (samplerArray.Length() != indexArray.ElementLength()) {
        Napi::RangeError::New(env, "decodeBatchAndSample: one sampler for each logit index").ThrowAsJavaScriptException();
        return env.Undefined();
    }
    std::vector<int32_t> logitIndexes(indexArray.ElementLength());
    std::vector<AddonSampler*> samplers(indexArray.ElementLength());
    for (size_t i = 0; i < logitIndexes.size(); i++) {
        logitIndexes[i] = (int32_t) indexArray[i];
        Napi::Value value = samplerArray.Get((uint32_t) i);
        if (!value.IsObject()) {
            Napi::TypeError::New(env, "decodeBatchAndSample: a sampler is not an object").ThrowAsJavaScriptException();
            return env.Undefined();
        }
        samplers[i] = Napi::ObjectWrap<AddonSampler>::Unwrap(value.As<Napi::Object>());
    }
    auto* worker = new AddonContextDecodeAndSampleWorker(env, this, std::move(logitIndexes), std::move(samplers));
    worker->Queue();
    return worker->GetPromise();
}
