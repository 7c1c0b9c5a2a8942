/** Text into HTML: escaped, and `://` broken up too, so a path or name can never read as a link (the report holds no URL). */
export function esc(s: string): string {
  return s
    .replace(/&/g, '&amp;')
    .replace(/</g, '&lt;')
    .replace(/>/g, '&gt;')
    .replace(/"/g, '&quot;')
    .replace(/:\/\//g, ':&#47;&#47;');
}
