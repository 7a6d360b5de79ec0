// How the console's answers read in the window: keys, accounts, a model's settings and the Model page's list as
// their views (contract.ts) show them, the models service's errors in the window's own words, and the model
// kind a call names. Pure: no service, no state.
import { resolve } from "node:path";
import { AppError } from "../../core/errors.js";
import type { AccountInfo } from "../accounts/accounts-service.js";
import type { KeyInfo } from "../keys/keys-service.js";
import { fitOf, RECOMMENDED_SPEECH_MODEL, SUGGESTED_MODELS } from "../models/model-sources.js";
import type { ModelList, ModelLoadSettings, ModelsService } from "../models/models-service.js";
import type { AccountView, KeyView, ModelKind, ModelSettings, ModelsView } from "./contract.js";

export function keyView(info: KeyInfo, windowKeyId: string | null = null): KeyView {
  return {
    id: info.id,
    account: info.account,
    name: info.name,
    hint: info.hint,
    reasoningTrace: info.reasoning_trace,
    createdAt: info.created_at,
    lastUsedAt: info.last_used_at,
    revokedAt: info.revoked_at,
    windowKey: info.id === windowKeyId,
  };
}

export function accountView(info: AccountInfo): AccountView {
  return {
    id: info.id,
    name: info.name,
    status: info.status,
    createdAt: info.created_at,
    activeKeys: info.active_keys,
    canLogIn: info.can_log_in,
    mustChangePassword: info.must_change_password,
    lastLoginAt: info.last_login_at,
    disabledAt: info.disabled_at,
  };
}

/** A model's settings as the window shows them: null for automatic. */
export function settingsView(settings: ModelLoadSettings): ModelSettings {
  return {
    contextSize: settings.contextSize ?? null,
    sequences: settings.sequences ?? null,
    gpuLayers: settings.gpuLayers ?? null,
    threads: settings.threads ?? null,
    draftModel: settings.draftModel ?? null,
  };
}

/**
 * The models service's messages name its command-line commands; the window gets the same facts in its own
 * words, naming its own buttons.
 */
export function inWindowWords(err: unknown, kind: ModelKind = "llm"): unknown {
  if (!(err instanceof AppError)) return err;
  const message = ((): string | null => {
    switch (err.code) {
      case "model_not_found":
        return "That model file is no longer in the models folder. The list on the Model page shows what is there.";
      case "draft_model_not_found":
        return "That draft model file is not in the models folder. Pick one of the files the Model page lists.";
      case "model_active":
        return kind === "speech"
          ? "This is the speech model in use: uploads get no transcript once it is removed (Remove asks to confirm that)."
          : "This is the model in use: press Use on another model first, then remove this one.";
      case "model_exists":
        return "A different file of that name is already in the models folder: remove it on the Model page first, then download again.";
      case "invalid_model_name":
        return "Pick a model from the list on the Model page.";
      case "invalid_sha256":
        return "This download cannot be checked against a checksum: give its source without one.";
      case "warm_start_forced":
        return "Warm start was set when the app was started, and that wins over this switch until the app is started without it.";
      default:
        return null;
    }
  })();
  return message === null ? err : new AppError(err.kind, message, { code: err.code, param: err.param, details: err.details, cause: err });
}

/** A model's saved settings in words, for the log. */
export function describeSettings(settings: ModelLoadSettings): string {
  const parts = [
    settings.contextSize === undefined ? null : `context ${settings.contextSize} tokens`,
    settings.sequences === undefined ? null : `${settings.sequences} answers at once`,
    settings.gpuLayers === undefined ? null : `${settings.gpuLayers} GPU layers`,
    settings.threads === undefined ? null : `${settings.threads} threads`,
    settings.draftModel === undefined ? null : `draft model ${settings.draftModel}`,
  ].filter(Boolean);
  return parts.length ? parts.join(", ") : "automatic";
}

/** The kind a call names: "llm" when it names none; anything else is refused. */
export function kindOf(options: { kind?: unknown } | null | undefined): ModelKind {
  const kind = options?.kind ?? "llm";
  if (kind !== "llm" && kind !== "speech")
    throw new AppError("invalid_request", `A model kind is "llm" or "speech", not ${JSON.stringify(kind)}.`, { code: "invalid_model_kind" });
  return kind;
}

/**
 * The Model page's list: the folder's models with their settings and which one is loaded, the suggested models
 * with how each fits this machine, and the speech models.
 */
export function modelsView(
  list: ModelList,
  context: {
    loaded: string | null;
    recommended: ReturnType<ModelsService["recommended"]>;
    machine: Parameters<typeof fitOf>[1];
    settingsOf(path: string): ModelLoadSettings;
  },
): ModelsView {
  return {
    directory: list.directory,
    active: list.active,
    loaded: context.loaded,
    models: list.models.map((m) => ({
      file: m.file,
      sizeBytes: m.sizeBytes,
      settings: settingsView(context.settingsOf(m.path)),
      active: m.active,
      loaded: context.loaded !== null && resolve(context.loaded) === resolve(m.path),
      name: m.name,
      architecture: m.architecture,
      quantization: m.quantization,
      contextLength: m.contextLength,
      source: m.source,
      error: m.error,
      vision: Boolean(m.projector),
    })),
    partial: list.partial.map((p) => ({ file: p.file, keptBytes: p.keptBytes, totalBytes: p.totalBytes, downloadingNow: p.downloadingNow, source: p.source, kind: p.kind })),
    recommended: { source: context.recommended.source, title: context.recommended.title },
    suggested: SUGGESTED_MODELS.map((m) => ({
      source: m.source,
      file: m.file,
      title: m.title,
      description: m.description,
      approxBytes: m.approxBytes,
      needsBytes: m.needsBytes,
      fit: fitOf(m, context.machine),
      recommended: m.source === context.recommended.source,
      downloaded: list.models.some((f) => f.file === m.file),
      vision: m.vision === true,
    })),
    speech: {
      directory: list.speech.directory,
      active: list.speech.active,
      models: list.speech.models.map((m) => ({
        file: m.file,
        sizeBytes: m.sizeBytes,
        active: m.active,
        sizeLabel: m.sizeLabel,
        weights: m.quantization,
        source: m.source,
        error: m.error,
      })),
      recommended: {
        source: RECOMMENDED_SPEECH_MODEL.source,
        file: RECOMMENDED_SPEECH_MODEL.file,
        title: RECOMMENDED_SPEECH_MODEL.title,
        approxBytes: RECOMMENDED_SPEECH_MODEL.approxBytes,
        downloaded: list.speech.models.some((m) => m.file === RECOMMENDED_SPEECH_MODEL.file),
      },
    },
  };
}
