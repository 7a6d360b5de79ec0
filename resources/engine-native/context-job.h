// svc-desktop's own code in node-llama-cpp's addon: a job on a context's binding that settles a promise
// (step-sampling.cpp, draft-rounds.cpp). It holds the context while it runs (Ref, Unref when it is done) and
// rejects the promise with the job's error; each job resolves it with what it made (OnOK).
#pragma once

#include "napi.h"
#include "../AddonContext.h"

namespace svc {

class ContextJob : public Napi::AsyncWorker {
    public:
        ContextJob(const Napi::Env& env, const char* name, AddonContext* ctx)
            : Napi::AsyncWorker(env, name),
              ctx(ctx),
              deferred(Napi::Promise::Deferred::New(env)) {
            ctx->Ref();
        }
        ~ContextJob() override {
            ctx->Unref();
        }

        Napi::Promise GetPromise() {
            return deferred.Promise();
        }

    protected:
        AddonContext* ctx;
        Napi::Promise::Deferred deferred;

        void OnError(const Napi::Error& err) override {
            deferred.Reject(err.Value());
        }
};

}  // namespace svc
