// svc-desktop's own code in node-llama-cpp's addon: a lone sequence's generation loop on a thread of its own.
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

// A lone sequence's generation loop. node-llama-cpp decodes and samples each
// token in two jobs on the libuv pool, each a trip from JavaScript and back (four thread wake-ups a
// token). While one sequence generates alone, this thread decodes, samples and decodes the sampled token
// ahead without waiting for JavaScript, as llama-server's slot loop does, and posts the sampled tokens to
// `callback(tokens)`: at once when `deliverMs` is 0, else together at most every `deliverMs` (the first
// at once; always before the run waits or ends), so that JavaScript wakes once for several tokens. The
// generation says how far it has got with `soloAsk(n, allow)`: it wants its n-th sampled token and can take
// `allow` more after it (its budget). The run samples at most `ahead` tokens past the last one asked for,
// and never past the budget. It ends, without decoding the token it just sampled, when that token ends the
// generation or its budget, the generation has not caught up within `askWaitMs`, `maxSamples` tokens were
// sampled, the next position would be `maxPosition`, or `soloStop()` was called; then
// `callback(-1, decoded, error)` says how many tokens it decoded into the sequence: the feed, then sampled
// tokens in order. The caller holds node-llama-cpp's context lock for the run.
struct AddonSoloMessage {
    std::vector<llama_token> tokens;
    bool done = false;
    int32_t decoded = 0;
    std::string error;
    AddonContext* context = nullptr;
    AddonSampler* sampler = nullptr;
    std::shared_ptr<AddonContext::SoloRun> run;
};

static void deliverSoloMessage(Napi::Env env, Napi::Function callback, AddonSoloMessage* message) {
    if (!message->done) {
        if (env != nullptr) {
            Napi::Array tokens = Napi::Array::New(env, message->tokens.size());
            for (size_t i = 0; i < message->tokens.size(); i++) {
                tokens.Set((uint32_t) i, Napi::Number::New(env, message->tokens[i]));
            }
            callback.Call({tokens});
        }
        delete message;
        return;
    }

    {
        std::lock_guard<std::mutex> lock(message->context->soloMutex);
        if (message->context->soloRun == message->run) {
            message->context->soloRun.reset();
        }
    }
    if (env != nullptr) {
        // (Without an environment Node is tearing down, references and all.)
        message->sampler->Unref();
        message->context->Unref();
        callback.Call({
            Napi::Number::New(env, -1),
            Napi::Number::New(env, message->decoded),
            message->error.empty() ? env.Undefined() : Napi::String::New(env, message->error)
        });
    }
    delete message;
}

Napi::Value AddonContext::RunSolo(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    if (disposed || ctx == nullptr) {
        Napi::Error::New(env, "Context is disposed").ThrowAsJavaScriptException();
        return env.Undefined();
    }
    if (info.Length() < 11 || !info[2].IsTypedArray() || !info[3].IsObject() || !info[8].IsFunction()) {
        Napi::TypeError::New(env, "runSolo(sequenceId, position, feed, sampler, maxPosition, maxSamples, askWaitMs, allowFirst, callback, ahead, deliverMs)").ThrowAsJavaScriptException();
        return env.Undefined();
    }

    const int32_t sequenceId = info[0].As<Napi::Number>().Int32Value();
    const int32_t firstPosition = info[1].As<Napi::Number>().Int32Value();
    const Napi::Uint32Array feedArray = info[2].As<Napi::Uint32Array>();
    AddonSampler* sampler = Napi::ObjectWrap<AddonSampler>::Unwrap(info[3].As<Napi::Object>());
    const int32_t maxPosition = info[4].As<Napi::Number>().Int32Value();
    const int32_t maxSamples = info[5].As<Napi::Number>().Int32Value();
    const int32_t askWaitMs = info[6].As<Napi::Number>().Int32Value();
    const int32_t allowFirst = std::min(std::max(0, info[7].As<Napi::Number>().Int32Value()), 1 << 20);
    const int32_t ahead = std::max(1, info[9].As<Napi::Number>().Int32Value());
    const int32_t deliverMs = std::max(0, info[10].As<Napi::Number>().Int32Value());

    std::vector<llama_token> feed(feedArray.ElementLength());
    for (size_t i = 0; i < feed.size(); i++) {
        feed[i] = static_cast<llama_token>(feedArray[i]);
    }
    if (feed.empty() || firstPosition + (int32_t) feed.size() > maxPosition + 1) {
        Napi::RangeError::New(env, "runSolo: the feed is empty or does not fit").ThrowAsJavaScriptException();
        return env.Undefined();
    }

    auto run = std::make_shared<SoloRun>();
    run->allow = allowFirst;
    {
        std::lock_guard<std::mutex> lock(soloMutex);
        if (soloRun != nullptr) {
            Napi::Error::New(env, "A solo run is already running on this context").ThrowAsJavaScriptException();
            return env.Undefined();
        }
        soloRun = run;
    }

    Ref();
    sampler->Ref();
    auto tsfn = Napi::ThreadSafeFunction::New(env, info[8].As<Napi::Function>(), "svcSoloRun", 0, 1);

    std::thread([this, run, sampler, tsfn, feed, sequenceId, firstPosition, maxPosition, maxSamples, askWaitMs, ahead, deliverMs]() mutable {
        // Sampled tokens not posted yet, and when the last ones were: tokens are posted together at most every
        // `deliverMs` (the first at once), and always before the run waits or ends.
        std::vector<llama_token> held;
        auto delivered = std::chrono::steady_clock::now() - std::chrono::milliseconds(deliverMs);
        auto deliver = [&]() {
            if (held.empty()) return;
            auto message = new AddonSoloMessage();
            message->tokens.swap(held);
            tsfn.NonBlockingCall(message, deliverSoloMessage);
            delivered = std::chrono::steady_clock::now();
        };
        // Whether the generation may take a token after the `samples`-th: it asked for `asked` and can take
        // `allow` more after that one; the run samples at most `ahead` past the last ask.
        auto mayGoOn = [&](int32_t samples) {
            return samples < run->asked + std::min(run->allow, ahead);
        };
        llama_batch soloBatch = llama_batch_init((int32_t) feed.size(), 0, 1);
        std::vector<llama_token> input = feed;
        int32_t position = firstPosition;
        int32_t samples = 0;
        int32_t decoded = 0;
        std::string error;

        try {
            while (true) {
                soloBatch.n_tokens = (int32_t) input.size();
                for (size_t i = 0; i < input.size(); i++) {
                    soloBatch.token[i] = input[i];
                    soloBatch.pos[i] = position + (int32_t) i;
                    soloBatch.n_seq_id[i] = 1;
                    soloBatch.seq_id[i][0] = sequenceId;
                    soloBatch.logits[i] = i == input.size() - 1;
                }

                sharedSamplerData.gotLogit = false;
                sharedSamplerData.hasLogits = false;
                ensureThreadpool();

                const int r = llama_decode(ctx, soloBatch);
                if (r != 0) {
                    error = r == 1
                        ? "could not find a KV slot for the batch (try reducing the size of the batch or increase the context)"
                        : "Eval has failed";
                    break;
                }
                llama_synchronize(ctx);
                position += (int32_t) input.size();
                decoded += (int32_t) input.size();

                sampler->rebuildChainIfNeeded();
                llama_token token;
                {
                    std::unique_lock<std::mutex> samplingLock(sharedSamplerData.mutex);
                    if (!sharedSamplerData.gotLogit) {
                        sharedSamplerData.hasLogits = llama_get_logits(ctx) != nullptr;
                        sharedSamplerData.gotLogit = true;
                    }
                    if (!sharedSamplerData.hasLogits) {
                        error = "This model does not support token generation";
                        break;
                    }

                    llama_token_data_array cur_p;
                    sampler->sampleAndReleaseLock(sharedSamplerData.mutex, samplingLock, ctx, (int32_t) input.size() - 1, cur_p, false);
                    if (cur_p.size == 0 || !(cur_p.selected >= 0 && cur_p.selected < (int32_t) cur_p.size)) {
                        error = "llama.cpp could not sample the next token.";
                        break;
                    }
                    token = cur_p.data[cur_p.selected].id;
                }
                sampler->acceptToken(token);
                samples++;

                held.push_back(token);

                if (llama_vocab_is_eog(model->vocab, token) || samples >= maxSamples || position >= maxPosition) {
                    break;
                }
                if (deliverMs == 0 || std::chrono::steady_clock::now() - delivered >= std::chrono::milliseconds(deliverMs)) {
                    deliver();
                }

                std::unique_lock<std::mutex> lock(run->mutex);
                if (!run->stop && !mayGoOn(samples) && run->asked + run->allow > samples) {
                    // Ahead of the generation by `ahead`: it gets what was sampled, and the run waits for it to ask.
                    lock.unlock();
                    deliver();
                    lock.lock();
                    run->cv.wait_for(lock, std::chrono::milliseconds(askWaitMs), [&] {
                        return run->stop || mayGoOn(samples) || run->asked + run->allow <= samples;
                    });
                }
                if (run->stop || !mayGoOn(samples)) {
                    break;
                }
                lock.unlock();

                input.assign(1, token);
            }
        } catch (const std::exception& e) {
            error = e.what();
        } catch (...) {
            error = "Unknown error in the solo run";
        }

        deliver();
        llama_batch_free(soloBatch);
        {
            std::lock_guard<std::mutex> lock(run->mutex);
            run->active = false;
        }
        run->cv.notify_all();

        auto done = new AddonSoloMessage();
        done->done = true;
        done->decoded = decoded;
        done->error = error;
        done->context = this;
        done->sampler = sampler;
        done->run = run;
        tsfn.NonBlockingCall(done, deliverSoloMessage);
        tsfn.Release();
    }).detach();

    return env.Undefined();
}

Napi::Value AddonContext::SoloAsk(const Napi::CallbackInfo& info) {
    const int32_t asked = info[0].As<Napi::Number>().Int32Value();
    const int32_t allow = std::min(std::max(0, info[1].As<Napi::Number>().Int32Value()), 1 << 20);
    std::shared_ptr<SoloRun> run;
    {
        std::lock_guard<std::mutex> lock(soloMutex);
        run = soloRun;
    }
    if (run != nullptr) {
        {
            std::lock_guard<std::mutex> lock(run->mutex);
            if (asked >= run->asked) {
                run->asked = asked;
                run->allow = allow;
            }
        }
        run->cv.notify_all();
    }
    return info.Env().Undefined();
}

Napi::Value AddonContext::SoloStop(const Napi::CallbackInfo& info) {
    std::shared_ptr<SoloRun> run;
    {
        std::lock_guard<std::mutex> lock(soloMutex);
        run = soloRun;
    }
    if (run != nullptr) {
        {
            std::lock_guard<std::mutex> lock(run->mutex);
            run->stop = true;
        }
        run->cv.notify_all();
    }
    return info.Env().Undefined();
}

void AddonContext::stopSoloAndWait() {
    std::shared_ptr<SoloRun> run;
    {
        std::lock_guard<std::mutex> lock(soloMutex);
        run = soloRun;
    }
    if (run == nullptr) {
        return;
    }
    std::unique_lock<std::mutex> lock(run->mutex);
    run->stop = true;
    run->cv.notify_all();
    run->cv.wait(lock, [&] { return !run->active; });
}
