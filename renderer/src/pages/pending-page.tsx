// Pages whose server APIs are still to come: the window has their place, and says what they will do.
export interface PendingPageProps {
  id: string;
  title: string;
  purpose: string;
  waitsFor: string;
}

export function PendingPage({ id, title, purpose, waitsFor }: PendingPageProps) {
  return (
    <section className="page" data-testid={`${id}-page`} aria-labelledby={`${id}-title`}>
      <header className="page-header">
        <h1 id={`${id}-title`}>{title}</h1>
      </header>
      <div className="card">
        <p>{purpose}</p>
        <p className="muted">This page opens when the server has {waitsFor}.</p>
      </div>
    </section>
  );
}
