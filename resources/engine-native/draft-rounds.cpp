// svc-desktop's own code in node-llama-cpp's addon: a draft model's drafts written in one job
// (server/engine/draft-model.ts, issue 44). `svc engine build` copies this folder (resources/engine-native)
// into the addon's source as llama/addon/svc/; resources/engine-patches/addon-hooks.patch declares
// DraftRounds in AddonContext.h and registers it as `draftRounds`. docs/architecture.md, "Native code".
//
// With node-llama-cpp's binding, each round of drafts (one decode holding a token of every draft being
// written, then a greedy sampling of each) is a trip through the libuv pool for the decode and one for each
// sampling, with JavaScript between rounds: a lone round of bench:spec's 28 MB draft took about 1.2 ms in the
// server where its decode takes 0.6. Here one job decodes every round of the drafts it is given and picks each
// next token itself: the most likely one (greedy: no sampler), with its probability as the confidence that
// ends a draft, by the rules of draft-model.ts `round` (an unsure draft goes on while one beside it is sure).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <string>
#include <vector>
#include "llama.h"
#include "../addonGlobals.h"
#include "../AddonModel.h"
#include "../AddonContext.h"
#include "context-job.h"

class AddonContextDraftRoundsWorker : public svc::ContextJob {
    public:
        std::vector<int32_t> sequenceIds;
        std::vector<int32_t> positions;
        std::vector<std::vector<llama_token>> feeds;
        std::vector<int32_t> maxGuesses;
        float minConfidence;
        int32_t firstThreads;
        int32_t nextThreads;
        std::vector<std::vector<llama_token>> guesses;
        std::vector<int32_t> read;
        // The rounds after the first (a token of each draft still being written; the first reads the feeds) and
        // what they took, decode and choice, for the thread policy's lone-decode measure (draft-model.ts).
        int32_t laterRounds = 0;
        double laterMs = 0;

        AddonContextDraftRoundsWorker(
            const Napi::Env& env,
            AddonContext* ctx,
            std::vector<int32_t> sequenceIds,
            std::vector<int32_t> positions,
            std::vector<std::vector<llama_token>> feeds,
            std::vector<int32_t> maxGuesses,
            float minConfidence,
            int32_t firstThreads,
            int32_t nextThreads
        )
            : svc::ContextJob(env, "AddonContextDraftRoundsWorker", ctx),
              sequenceIds(std::move(sequenceIds)),
              positions(std::move(positions)),
              feeds(std::move(feeds)),
              maxGuesses(std::move(maxGuesses)),
              minConfidence(minConfidence),
              firstThreads(firstThreads),
              nextThreads(nextThreads) {}

    protected:
        void Execute() {
            const size_t n = sequenceIds.size();
            size_t total = 0;
            for (const auto& feed : feeds) total += feed.size();
            llama_batch batch = llama_batch_init((int32_t) std::max(total, n), 0, 1);
            try {
                ctx->ensureThreadpool();
                const llama_vocab* vocab = llama_model_get_vocab(ctx->model->model);
                const int32_t vocabSize = llama_vocab_n_tokens(vocab);
                guesses.assign(n, {});
                read.assign(n, 0);
                std::vector<bool> active(n, true);
                std::vector<llama_token> next(n, 0);
                std::vector<int32_t> logitAt(n, -1);
                bool first = true;
                for (;;) {
                    const auto roundStart = std::chrono::steady_clock::now();
                    const bool later = !first;
                    batch.n_tokens = 0;
                    for (size_t i = 0; i < n; i++) {
                        logitAt[i] = -1;
                        if (!active[i]) continue;
                        const std::vector<llama_token> one{next[i]};
                        const std::vector<llama_token>& tokens = first ? feeds[i] : one;
                        for (size_t j = 0; j < tokens.size(); j++) {
                            const int32_t k = batch.n_tokens++;
                            batch.token[k] = tokens[j];
                            batch.pos[k] = positions[i] + read[i];
                            batch.n_seq_id[k] = 1;
                            batch.seq_id[k][0] = sequenceIds[i];
                            batch.logits[k] = j + 1 == tokens.size();
                            read[i]++;
                        }
                        logitAt[i] = batch.n_tokens - 1;
                    }
                    if (batch.n_tokens == 0) break;
                    const int32_t threads = first ? firstThreads : nextThreads;
                    if (threads > 0 && llama_n_threads(ctx->ctx) != threads) llama_set_n_threads(ctx->ctx, threads, threads);
                    first = false;
                    const int r = llama_decode(ctx->ctx, batch);
                    if (r != 0) {
                        SetError(r == 1
                            ? "could not find a KV slot for the draft (try reducing the size of the batch or increase the context)"
                            : "Eval has failed");
                        llama_batch_free(batch);
                        return;
                    }

                    // Each draft's most likely next token, and its probability (the softmax at its logit).
                    std::vector<llama_token> tokens(n, -1);
                    std::vector<bool> sure(n, false);
                    std::vector<bool> ends(n, false);
                    bool goesOn = false;
                    for (size_t i = 0; i < n; i++) {
                        if (logitAt[i] < 0) continue;
                        const float* logits = llama_get_logits_ith(ctx->ctx, logitAt[i]);
                        if (logits == nullptr) {
                            SetError("This model does not support token generation");
                            llama_batch_free(batch);
                            return;
                        }
                        int32_t best = 0;
                        for (int32_t t = 1; t < vocabSize; t++) if (logits[t] > logits[best]) best = t;
                        double sum = 0;
                        for (int32_t t = 0; t < vocabSize; t++) sum += std::exp((double) logits[t] - (double) logits[best]);
                        tokens[i] = best;
                        sure[i] = 1.0 / sum >= minConfidence;
                        ends[i] = (int32_t) guesses[i].size() + 1 >= maxGuesses[i] || llama_vocab_is_eog(vocab, best);
                        goesOn = goesOn || (sure[i] && !ends[i]);
                    }
                    for (size_t i = 0; i < n; i++) {
                        if (logitAt[i] < 0) continue;
                        if (!sure[i] && !goesOn) {
                            active[i] = false;
                            continue;
                        }
                        guesses[i].push_back(tokens[i]);
                        if (ends[i]) active[i] = false;
                        else next[i] = tokens[i];
                    }
                    if (later) {
                        laterRounds++;
                        laterMs += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - roundStart).count();
                    }
                }
            } catch (const std::exception& e) {
                SetError(e.what());
            } catch(...) {
                SetError("Unknown error when writing drafts");
            }
            llama_batch_free(batch);
        }
        void OnOK() {
            // Each draft: the tokens its sequence read (its feed, then the guesses decoded after it), then its guesses;
            // and on the array, the rounds after the first and their milliseconds.
            Napi::Array result = Napi::Array::New(Env(), guesses.size());
            result.Set("laterRounds", Napi::Number::New(Env(), laterRounds));
            result.Set("laterMs", Napi::Number::New(Env(), laterMs));
            for (size_t i = 0; i < guesses.size(); i++) {
                Napi::Array one = Napi::Array::New(Env(), guesses[i].size() + 1);
                one.Set((uint32_t) 0, Napi::Number::New(Env(), read[i]));
                for (size_t j = 0; j < guesses[i].size(); j++) one.Set((uint32_t) (j + 1), Napi::Number::New(Env(), guesses[i][j]));
                result.Set((uint32_t) i, one);
            }
            deferred.Resolve(result);
        }
};

// draftRounds(sequenceIds, positions, feed, feedLengths: Uint32Array, maxGuesses: Uint32Array,
// minConfidence: number, firstThreads: number, nextThreads: number): Promise<number[][]>
Napi::Value AddonContext::DraftRounds(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    if (disposed) {
        Napi::Error::New(env, "Context is disposed").ThrowAsJavaScriptException();
        return env.Undefined();
    }
    if (info.Length() < 8 || !info[0].IsTypedArray() || !info[1].IsTypedArray() || !info[2].IsTypedArray() || !info[3].IsTypedArray() ||
        !info[4].IsTypedArray() || !info[5].IsNumber() || !info[6].IsNumber() || !info[7].IsNumber()) {
        Napi::TypeError::New(env, "draftRounds(sequenceIds, positions, feed, feedLengths, maxGuesses: Uint32Array, minConfidence, firstThreads, nextThreads: number)")
            .ThrowAsJavaScriptException();
        return env.Undefined();
    }
    const Napi::Uint32Array ids = info[0].As<Napi::Uint32Array>();
    const Napi::Uint32Array positions = info[1].As<Napi::Uint32Array>();
    const Napi::Uint32Array feed = info[2].As<Napi::Uint32Array>();
    const Napi::Uint32Array lengths = info[3].As<Napi::Uint32Array>();
    const Napi::Uint32Array maxGuesses = info[4].As<Napi::Uint32Array>();
    const size_t n = ids.ElementLength();
    size_t total = 0;
    for (size_t i = 0; i < lengths.ElementLength(); i++) total += lengths[i];
    if (positions.ElementLength() != n || lengths.ElementLength() != n || maxGuesses.ElementLength() != n || total != feed.ElementLength()) {
        Napi::RangeError::New(env, "draftRounds: one position, feed length and most guesses for each sequence, and the feeds' lengths summing to the feed's")
            .ThrowAsJavaScriptException();
        return env.Undefined();
    }
    std::vector<int32_t> idList(n), positionList(n), maxList(n);
    std::vector<std::vector<llama_token>> feeds(n);
    size_t at = 0;
    for (size_t i = 0; i < n; i++) {
        idList[i] = (int32_t) ids[i];
        positionList[i] = (int32_t) positions[i];
        maxList[i] = (int32_t) maxGuesses[i];
        if (lengths[i] == 0 || maxList[i] <= 0) {
            Napi::RangeError::New(env, "draftRounds: each draft reads at least one token and writes at least one").ThrowAsJavaScriptException();
            return env.Undefined();
        }
        for (uint32_t j = 0; j < lengths[i]; j++) feeds[i].push_back((llama_token) feed[at++]);
    }
    auto* worker = new AddonContextDraftRoundsWorker(
        env, this, std::move(idList), std::move(positionList), std::move(feeds), std::move(maxList),
        info[5].As<Napi::Number>().FloatValue(), info[6].As<Napi::Number>().Int32Value(), info[7].As<Napi::Number>().Int32Value());
    worker->Queue();
    return worker->GetPromise();
}
