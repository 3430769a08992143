//! The documents of `bat serve --ui` and their Content-Security-Policies.
//! The live page's script builds every element from `/ui/state` with
//! `textContent` and `createElement`; nothing from the ledger is inserted
//! as markup. The few server-built pages escape what they show.

use sha2::{Digest, Sha256};

use crate::report::svg::esc;

/// The policy of pages without script: nothing but their own inline style.
pub const STATIC_CSP: &str = "default-src 'none'; style-src 'unsafe-inline'; base-uri 'none'; form-action 'none'; frame-ancestors 'self'";

/// A fresh nonce (128 random bits, hex).
pub fn nonce() -> String {
    use std::io::Read;
    let mut buf = [0u8; 16];
    let random = std::fs::File::open("/dev/urandom").and_then(|mut f| f.read_exact(&mut buf));
    if random.is_err() {
        // No /dev/urandom: a digest of the clock and a counter still
        // differs on every response.
        static COUNT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let n = COUNT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let mut h = Sha256::new();
        h.update(format!("{:?}{n}", std::time::SystemTime::now()).as_bytes());
        buf.copy_from_slice(&h.finalize()[..16]);
    }
    hex::encode(buf)
}

/// The live page's policy: its own script and style (by nonce), requests
/// to this server, frames from this server.
pub fn page_csp(nonce: &str) -> String {
    format!(
        "default-src 'none'; script-src 'nonce-{nonce}'; style-src 'nonce-{nonce}'; connect-src 'self'; frame-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
    )
}

/// Standard base64 (with padding), for CSP hashes.
fn base64(bytes: &[u8]) -> String {
    const A: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            chunk.get(1).copied().unwrap_or(0),
            chunk.get(2).copied().unwrap_or(0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(char::from(A[((n >> (18 - 6 * i)) & 63) as usize]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// The report page's policy: exactly its own inline scripts (by hash) and
/// inline style. The report escapes every ledger string, so each literal
/// `<script>` in it is the renderer's own.
pub fn report_csp(body: &str) -> String {
    let mut hashes = String::new();
    let mut rest = body;
    while let Some(start) = rest.find("<script>") {
        let after = &rest[start + "<script>".len()..];
        let Some(end) = after.find("</script>") else {
            break;
        };
        let digest = Sha256::digest(&after.as_bytes()[..end]);
        hashes.push_str(&format!(" 'sha256-{}'", base64(&digest)));
        rest = &after[end..];
    }
    let script = if hashes.is_empty() {
        " 'none'".to_string()
    } else {
        hashes
    };
    format!(
        "default-src 'none'; script-src{script}; style-src 'unsafe-inline'; img-src data:; base-uri 'none'; form-action 'none'; frame-ancestors 'self'"
    )
}

const PAGE_STYLE: &str = "body{font:14px/1.45 system-ui,sans-serif;margin:0;color:#1d2230;background:#f6f7f9}header{background:#1d2230;color:#fff;padding:10px 18px;display:flex;gap:16px;align-items:baseline}header h1{font-size:18px;margin:0}#conn{font-size:12px;opacity:.8}main{padding:12px 18px}section{background:#fff;border:1px solid #dde1e8;border-radius:6px;padding:10px 14px;margin:0 0 14px}h2{font-size:15px;margin:4px 0 10px}h3{font-size:14px;margin:10px 0 6px}table{border-collapse:collapse;font-size:12.5px}td,th{border-bottom:1px solid #e6e8ee;padding:3px 8px;text-align:right;white-space:nowrap}th{background:#f0f2f6}td.l,th.l{text-align:left}.muted{color:#6b7285}.run{border:1px solid #dde1e8;border-radius:6px;padding:8px 10px;margin:6px 0}.run dl{display:grid;grid-template-columns:max-content 1fr;gap:2px 12px;margin:4px 0}.run dt{color:#6b7285}.run dd{margin:0}.phase{font-weight:600;padding:1px 6px;border-radius:4px;background:#e8eefc}.st-running{color:#0a6b2d}.st-stopped,.st-failed{color:#a11}.st-complete{color:#335}pre.log{background:#11151c;color:#d8dee9;padding:6px 8px;border-radius:4px;max-height:260px;overflow:auto;font-size:12px;white-space:pre-wrap;word-break:break-all}.promote{color:#0a6b2d}.hold{color:#a15c00}iframe{width:100%;height:900px;border:0}ul.branches{margin:0;padding-left:18px}.sparks{display:flex;flex-wrap:wrap;gap:10px;margin:6px 0}.sparks figure{margin:0}.sparks figcaption{font-size:11px;color:#6b7285}svg.spark{background:#f6f7fb;border-radius:3px}";

const PAGE_SCRIPT: &str = r#"(function(){'use strict';
var $=function(id){return document.getElementById(id)};
var skew=0,lastKey=null,failures=0;
function el(tag,text,cls){var e=document.createElement(tag);if(text!==undefined&&text!==null)e.textContent=String(text);if(cls)e.className=cls;return e}
function num(v){return typeof v==='number'&&isFinite(v)?v.toFixed(4):''}
function dur(ms){if(!(ms>=0))return '';var s=Math.floor(ms/1000),h=Math.floor(s/3600),m=Math.floor(s%3600/60);s=s%60;return (h?h+'h ':'')+(h||m?m+'m ':'')+s+'s'}
function clear(n){while(n.firstChild)n.removeChild(n.firstChild)}
function row(cells,cls){var tr=el('tr',null,cls);cells.forEach(function(c){var td=el('td',c[0],c[1]||'');tr.appendChild(td)});return tr}
function head(names){var tr=el('tr');names.forEach(function(n,i){tr.appendChild(el('th',n,i<2?'l':''))});var th=el('thead');th.appendChild(tr);return th}
function stepsTable(steps){var keys=stepKeys(steps);var t=el('table','', 'steps');var hr=el('tr');hr.appendChild(el('th','step','l'));keys.forEach(function(k){hr.appendChild(el('th',k))});var th=el('thead');th.appendChild(hr);t.appendChild(th);var tb=el('tbody');steps.slice(-8).forEach(function(s){var tr=el('tr','', 'step-row');tr.appendChild(el('td',s.step,'l'));keys.forEach(function(k){tr.appendChild(el('td',num(s.values[k])))});tb.appendChild(tr)});t.appendChild(tb);return t}
function stepKeys(steps){var keys=[];steps.forEach(function(s){Object.keys(s.values).forEach(function(k){if(keys.indexOf(k)<0)keys.push(k)})});return keys.sort()}
function spark(steps,key){var NS='http://www.w3.org/2000/svg';var pts=steps.filter(function(s){return typeof s.values[key]==='number'});var svg=document.createElementNS(NS,'svg');svg.setAttribute('width','160');svg.setAttribute('height','36');svg.setAttribute('class','spark');svg.setAttribute('data-points',String(pts.length));var t=document.createElementNS(NS,'title');t.textContent=key;svg.appendChild(t);if(!pts.length)return svg;var xs=pts.map(function(s){return s.step}),ys=pts.map(function(s){return s.values[key]});var x0=Math.min.apply(null,xs),x1=Math.max.apply(null,xs),y0=Math.min.apply(null,ys),y1=Math.max.apply(null,ys);var d=pts.map(function(s,i){var x=x1>x0?(s.step-x0)/(x1-x0)*156+2:80,y=y1>y0?34-(s.values[key]-y0)/(y1-y0)*32:18;return (i?'L':'M')+x.toFixed(1)+' '+y.toFixed(1)}).join(' ');var p=document.createElementNS(NS,'path');p.setAttribute('d',d);p.setAttribute('fill','none');p.setAttribute('stroke','#3366cc');p.setAttribute('stroke-width','1.5');svg.appendChild(p);return svg}
function sparks(steps){var box=el('div',null,'sparks');stepKeys(steps).forEach(function(k){var f=el('figure',null,'spark-fig');f.appendChild(spark(steps,k));var c=el('figcaption',k);f.appendChild(c);box.appendChild(f)});return box}
function renderRun(r){var d=el('div',null,'run');d.setAttribute('data-run-id',r.run_id);d.setAttribute('data-status',r.shown_status);d.setAttribute('data-phase',r.phase);
var h=el('h3');h.appendChild(el('span',r.branch||'(current branch)','run-branch'));h.appendChild(document.createTextNode(' — '));h.appendChild(el('span',r.shown_status,'run-status st-'+r.shown_status));d.appendChild(h);
var dl=el('dl');function item(k,v,cls){dl.appendChild(el('dt',k));var dd=el('dd',null);if(v instanceof Node)dd.appendChild(v);else dd.textContent=String(v);if(cls)dd.className=cls;dl.appendChild(dd)}
item('run id',r.run_id,'run-id');item('phase',el('span',r.shown_status==='running'?r.phase:r.shown_status==='stopped'?'stopped':r.phase,'phase'));item('round',(r.round_id||'—')+(r.target_stage?' (target '+r.target_stage+')':''),'run-round');
item('rounds recorded',r.rounds_recorded+' of '+r.rounds_total,'run-recorded');
var ph=el('span','','elapsed');ph.setAttribute('data-since',String(r.phase_started_unix_ms));if(r.shown_status!=='running')ph.setAttribute('data-until',String(r.updated_unix_ms));item('in this phase',ph);
var all=el('span','','elapsed');all.setAttribute('data-since',String(r.started_unix_ms));if(r.shown_status!=='running')all.setAttribute('data-until',String(r.updated_unix_ms));item('since start',all);
d.appendChild(dl);
d.appendChild(el('div',r.steps.length+' step(s) of step metrics this round','muted step-count'));if(r.steps.length){d.appendChild(sparks(r.steps));d.appendChild(stepsTable(r.steps))}
var pre=el('pre',null,'log');r.log_tail.forEach(function(l){pre.appendChild(document.createTextNode('['+l.label+' '+l.stream+'] '+l.text+'\n'))});if(!r.log_tail.length)pre.textContent='(no output yet)';d.appendChild(pre);return d}
function tick(){var now=Date.now()+skew;document.querySelectorAll('span.elapsed').forEach(function(s){var a=Number(s.getAttribute('data-since')),u=s.getAttribute('data-until');s.textContent=dur((u?Number(u):now)-a)})}
function render(s){skew=s.now_unix_ms-Date.now();
var live=$('runs');clear(live);if(!s.runs.length)live.appendChild(el('p','No run has published a live state yet (start one with bat run).','muted'));s.runs.forEach(function(r){live.appendChild(renderRun(r))});
var bl=$('branch-list');clear(bl);s.branches.forEach(function(b){var li=el('li',null,'branch');li.setAttribute('data-branch',b.name);li.appendChild(el('span',b.name,'branch-name'));li.appendChild(document.createTextNode(' — '+b.round_count+' round(s), tip '+b.tip.slice(0,12)));bl.appendChild(li)});
var rt=$('round-tables');clear(rt);s.branches.forEach(function(b){if(!b.rounds.length)return;rt.appendChild(el('h3',b.name,'rounds-branch'));var t=el('table');t.appendChild(head(['round','gate','target','next','Overall','Task','Agentic','audit gap','run','commit']));var tb=el('tbody');b.rounds.slice().reverse().forEach(function(r){var g=r.gate_status||'';var tr=row([[r.round_id,'l'],[g,'l '+g],[r.target_stage||''],[r.next_target_stage||''],[num(r.overall)],[num(r.task)],[num(r.agentic)],[num(r.audit_gap)],[r.run_id||''],[String(r.commit).slice(0,12)]],'round-row');tr.setAttribute('data-branch',b.name);tb.appendChild(tr)});t.appendChild(tb);rt.appendChild(t)});
if(s.report_key!==lastKey){lastKey=s.report_key;$('report').setAttribute('src','/ui/report?k='+encodeURIComponent(s.report_key))}
$('conn').textContent='updated '+new Date(s.now_unix_ms).toISOString().slice(11,19)+' UTC';document.body.setAttribute('data-updates',String(Number(document.body.getAttribute('data-updates')||0)+1));tick()}
function poll(){fetch('/ui/state',{credentials:'same-origin',cache:'no-store'}).then(function(r){if(!r.ok)throw new Error('HTTP '+r.status);return r.json()}).then(function(s){failures=0;render(s)}).catch(function(e){failures++;$('conn').textContent='cannot reach the server ('+e.message+'); retrying'}).then(function(){setTimeout(poll,failures?3000:1000)})}
setInterval(tick,500);poll()})();"#;

/// The live page, its script and style carrying `nonce`.
pub fn live_page(nonce: &str) -> String {
    format!(
        "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><meta name=\"viewport\" content=\"width=device-width,initial-scale=1\"><title>bat — live campaign</title><link rel=\"icon\" href=\"data:,\"><style nonce=\"{nonce}\">{PAGE_STYLE}</style></head><body><header><h1>bat — live campaign</h1><span id=\"conn\">connecting…</span></header><main><section id=\"live\"><h2>Campaigns in progress</h2><div id=\"runs\"></div></section><section id=\"branches\"><h2>Branches</h2><ul class=\"branches\" id=\"branch-list\"></ul></section><section id=\"rounds\"><h2>Rounds (newest first)</h2><div id=\"round-tables\"></div></section><section id=\"plots\"><h2>Report</h2><iframe id=\"report\" title=\"bat report\"></iframe></section></main><script nonce=\"{nonce}\">{PAGE_SCRIPT}</script></body></html>"
    )
}

/// A small page with a title and one message.
pub fn message_page(title: &str, message: &str) -> String {
    format!(
        "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>{t}</title><style>body{{font:14px/1.5 system-ui,sans-serif;margin:2em;color:#1d2230}}</style></head><body><h1>{t}</h1><p>{m}</p></body></html>",
        t = esc(title),
        m = esc(message)
    )
}

/// The 401 page.
pub fn refused_page(why: &str) -> String {
    message_page(
        "bat serve: a token is needed",
        &format!(
            "{why}. Open /ui?token=TOKEN once with a read token from the server's token file; the browser then keeps it in a cookie for this server."
        ),
    )
}

/// The report frame before any round is committed.
pub fn no_rounds_page() -> String {
    message_page(
        "No rounds yet",
        "No branch holds a round commit yet; the plots appear once bat run records the first round.",
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_matches_the_standard_alphabet() {
        assert_eq!(base64(b""), "");
        assert_eq!(base64(b"f"), "Zg==");
        assert_eq!(base64(b"fo"), "Zm8=");
        assert_eq!(base64(b"foo"), "Zm9v");
        assert_eq!(base64(b"foobar"), "Zm9vYmFy");
    }

    #[test]
    fn report_policy_allows_exactly_the_pages_scripts() {
        let csp =
            report_csp("<p>x</p><script>a()</script><p>&lt;script&gt;</p><script>b()</script>");
        let a = base64(&Sha256::digest(b"a()"));
        let b = base64(&Sha256::digest(b"b()"));
        assert!(csp.contains(&format!("'sha256-{a}'")), "{csp}");
        assert!(csp.contains(&format!("'sha256-{b}'")), "{csp}");
        assert_eq!(csp.matches("sha256-").count(), 2);
        assert!(report_csp("<p>none</p>").contains("script-src 'none'"));
    }

    #[test]
    fn pages_escape_and_nonces_differ() {
        let p = message_page("<t>", "<script>alert(1)</script>");
        assert!(!p.contains("<script>alert"));
        assert!(p.contains("&lt;script&gt;alert(1)&lt;/script&gt;"));
        assert_ne!(nonce(), nonce());
        let n = nonce();
        assert_eq!(live_page(&n).matches(&format!("nonce=\"{n}\"")).count(), 2);
    }
}
