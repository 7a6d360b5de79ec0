// A destructive action confirmed in place: the row's button turns into "<confirm>" and "<cancel>" (with the
// question before them where the button's label alone does not say enough).
export function ConfirmInline({
  question,
  confirmLabel,
  cancelLabel = "Cancel",
  testId,
  busy,
  onConfirm,
  onCancel,
}: {
  question?: string;
  confirmLabel: string;
  cancelLabel?: string;
  testId: string;
  busy?: boolean;
  onConfirm: () => void;
  onCancel: () => void;
}) {
  return (
    <>
      {question && (
        <>
          <span className="small">{question}</span>{" "}
        </>
      )}
      <button className="danger" data-testid={testId} disabled={busy} onClick={onConfirm}>
        {confirmLabel}
      </button>{" "}
      <button onClick={onCancel}>{cancelLabel}</button>
    </>
  );
}
