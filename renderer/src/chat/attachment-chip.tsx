// An attached file as a chip: a thumbnail (images Chromium can show) or a kind badge, its name and size, and
// what the model gets from it (kind and token estimate), its upload progress, or why it will not be sent.
import { useState } from "react";
import { KIND_LABEL } from "../files-client";
import { formatBytes } from "../format";
import { X } from "../icons";
import { badgeOf, kindOf } from "./attachments";
import type { Attachment, PendingAttachment } from "./types";

/** uploading → reading (stored, the server still extracting) → ready; or refused. A sent file may be gone. */
export type ChipState = "uploading" | "reading" | "ready" | "refused" | "gone";

function kindLabel(kind: string | undefined): string | null {
  return kind ? (KIND_LABEL[kind] ?? kind) : null;
}

function tokensText(tokens: number): string {
  return `≈ ${tokens.toLocaleString("en-US")} tokens`;
}

export function pendingState(a: PendingAttachment): ChipState {
  if (a.error || a.file?.status === "error") return "refused";
  if (!a.file) return "uploading";
  return a.file.status === "processed" ? "ready" : "reading";
}

function pendingDetail(a: PendingAttachment, contextSize: number | null): string {
  if (a.error) return `Not attached: ${a.error}`;
  if (!a.file) return a.restoring ? "Checking that it is still on the server…" : a.progress < 1 ? `Uploading ${Math.floor(a.progress * 100)}%` : "Reading it…";
  const kind = kindLabel(a.file.content_kind) ?? "File";
  if (a.file.status === "error") return `Not attached: ${a.file.status_details ?? "the server could not read it"}`;
  if (a.file.status === "uploaded") return `${kind} · still being read`;
  const over = contextSize !== null && a.file.token_estimate >= contextSize;
  return `${kind} · ${tokensText(a.file.token_estimate)}${over ? `, more than the ${contextSize.toLocaleString("en-US")} this model reads at once` : ""}`;
}

interface ChipProps {
  /** Readable, but more than the model's context holds. */
  tooBig?: boolean;
  name: string;
  size: number;
  previewUrl: string | null;
  badge: string;
  state: ChipState;
  detail: string;
  progress?: number;
  onRemove?: () => void;
}

function Chip({ name, size, previewUrl, badge, state, detail, progress, onRemove, tooBig = false }: ChipProps) {
  const [broken, setBroken] = useState(false);
  const failed = state === "refused" || state === "gone" || tooBig;
  return (
    <span className={`chip ${failed ? "failed" : ""}`} data-testid="attachment-chip" data-state={state} data-too-big={tooBig ? "true" : undefined}>
      {previewUrl && !broken ? (
        <img src={previewUrl} alt="" onError={() => setBroken(true)} />
      ) : (
        <span className="chip-icon" aria-hidden>
          {badge}
        </span>
      )}
      <span className="chip-text">
        <span className="chip-name" title={name}>
          {name} <span className="muted">({formatBytes(size)})</span>
        </span>
        <span className={`small ${failed ? "error" : "muted"}`} data-testid="attachment-detail">
          {detail}
        </span>
        {state === "uploading" && progress !== undefined && <progress value={progress} max={1} aria-label={`Uploading ${name}`} />}
      </span>
      {onRemove && (
        <button type="button" className="icon" onClick={onRemove} aria-label={`Remove ${name}`} title="Remove">
          <X size={13} aria-hidden />
        </button>
      )}
    </span>
  );
}

/** A file in the message box; `contextSize`: the model's, to say when the file alone is more than it. */
export function PendingChip({ attachment: a, onRemove, contextSize = null }: { attachment: PendingAttachment; onRemove: () => void; contextSize?: number | null }) {
  return (
    <Chip
      tooBig={contextSize !== null && a.file?.status === "processed" && a.file.token_estimate >= contextSize}
      name={a.name}
      size={a.size}
      previewUrl={a.previewUrl}
      badge={badgeOf(a.name, a.file?.content_kind ?? kindOf(a)?.kind ?? null)}
      state={pendingState(a)}
      detail={pendingDetail(a, contextSize)}
      progress={a.restoring ? undefined : a.progress}
      onRemove={onRemove}
    />
  );
}

/** A file sent with a message; its thumbnail only while this window still has the picked file. */
export function SentChip({ attachment: a, previewUrl }: { attachment: Attachment; previewUrl: string | null }) {
  const kind = kindLabel(a.kind);
  const detail = a.gone
    ? "No longer on the server (deleted, or expired after 30 days); left out from now on"
    : [kind, a.tokens !== undefined ? tokensText(a.tokens) : null].filter(Boolean).join(" · ") || "File";
  return <Chip name={a.name} size={a.size} previewUrl={a.gone ? null : previewUrl} badge={badgeOf(a.name, a.kind ?? null)} state={a.gone ? "gone" : "ready"} detail={detail} />;
}
