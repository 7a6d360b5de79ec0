// 0006: agent runs in the audit records. A run's content is never stored (it lives only while the run
// runs and in its response); its record keeps how it ended and how many steps it took, beside run_id and
// the tokens the record already has.
export const sql = `
-- queued, in_progress, requires_action, completed, failed, cancelled, incomplete (NULL: not a run request)
ALTER TABLE audit_records ADD COLUMN run_status TEXT;
-- Model steps and tool calls of the run.
ALTER TABLE audit_records ADD COLUMN run_steps INTEGER;
CREATE INDEX audit_records_run ON audit_records(run_id) WHERE run_id IS NOT NULL;
`;
