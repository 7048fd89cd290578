"""The style sheet and the one script of a report's HTML page, inlined in the page.

The script makes the table interactive (sort by a heading, search every column, filter
one column) on the rows the page holds; it reads the table itself, so no data is ever
written into script. The page's Content-Security-Policy forbids fetching anything.

Printing: A4 landscape with page numbers, the table's heading repeated on every page,
long cells wrapped instead of columns cut (between words; a cell with a long unbroken
run such as JSON anywhere), no controls, and charts kept whole.
"""

from __future__ import annotations

# Nothing is loaded from anywhere: inline style and script only, images only as data.
CSP = (
    "default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; "
    "img-src data:; base-uri 'none'; form-action 'none'"
)

STYLE = """
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,Arial,sans-serif;margin:2rem;
color:#1b1f23;background:#fff;line-height:1.4}
h1{font-size:1.6rem;margin:0 0 .25rem}h2{font-size:1.15rem;margin:1.75rem 0 .5rem}
.sub{color:#57606a;margin:0 0 1rem}
.facts{border-collapse:collapse;margin:.25rem 0}
.facts th{text-align:left;font-weight:600;padding:.2rem 1.5rem .2rem 0;color:#57606a;
vertical-align:top}
.facts td{padding:.2rem 0;max-width:60rem}
.cols{display:flex;flex-wrap:wrap;gap:0 3rem}
.note{background:#fff8c5;border:1px solid #d4a72c;padding:.5rem .75rem;border-radius:4px}
.wrap{overflow:auto;max-height:75vh;border:1px solid #d0d7de;border-radius:4px}
table.data{border-collapse:collapse;font-size:.85rem;white-space:nowrap}
table.data th{position:sticky;top:0;background:#1f4e78;color:#fff;text-align:left;
padding:.35rem .6rem;z-index:1}
table.data th[data-sort]{cursor:pointer;user-select:none}
table.data th[aria-sort=ascending]::after{content:" \\25B2"}
table.data th[aria-sort=descending]::after{content:" \\25BC"}
table.data tr.filters th{top:2rem;background:#dde6ef;padding:.2rem .3rem}
table.data tr.filters input{width:100%;min-width:4rem;box-sizing:border-box;font:inherit;
font-size:.8rem;padding:.1rem .25rem;border:1px solid #9aa5b1;border-radius:3px}
table.data td{padding:.25rem .6rem;border-top:1px solid #eaeef2}
table.data tbody tr:nth-child(even) td{background:#f6f8fa}
table.data tfoot td{font-weight:600;border-top:2px solid #1f4e78;background:#eef3f8}
td.num{text-align:right;font-variant-numeric:tabular-nums}
.tiles{display:flex;flex-wrap:wrap;gap:.75rem;margin:1rem 0}
.tile{border:1px solid #d0d7de;border-left:6px solid #bd0026;border-radius:4px;
padding:.5rem .9rem;min-width:9rem}
.tile b{display:block;font-size:1.6rem;font-variant-numeric:tabular-nums}
.tile span{color:#57606a;font-size:.85rem}
.controls{display:flex;gap:1rem;align-items:center;margin:.5rem 0}
.controls input{font:inherit;padding:.3rem .5rem;min-width:18rem;border:1px solid #9aa5b1;
border-radius:4px}
figure{margin:0 0 1rem}figure.chart svg{max-width:100%;height:auto}
svg text{font-size:12px;fill:#1b1f23}
svg text.place{font-size:13px;font-weight:700;fill:#1b1f23;paint-order:stroke;
stroke:#fff;stroke-width:3px;stroke-linejoin:round}
@page{size:A4 landscape;margin:12mm 10mm 14mm;
@bottom-right{content:"Page " counter(page) " of " counter(pages);font-size:8pt;color:#57606a}
@bottom-left{content:string(title);font-size:8pt;color:#57606a}}
@media print{
body{margin:0;font-size:9pt}h1{string-set:title content();font-size:14pt}
h2{font-size:11pt;break-after:avoid}
.controls,tr.filters,.noprint{display:none !important}
.wrap{overflow:visible;max-height:none;border:none}
table.data{width:100%;white-space:normal;font-size:6.5pt;table-layout:auto}
table.data th{position:static;background:#1f4e78 !important;color:#fff !important;
-webkit-print-color-adjust:exact;print-color-adjust:exact}
table.data td,table.data th{padding:.1rem .2rem;overflow-wrap:break-word}
table.data td.brk{overflow-wrap:anywhere}
table.data td.num,table.data td.ts{white-space:nowrap;overflow-wrap:normal}
table.data th{overflow-wrap:normal;hyphens:auto}
.tiles{break-inside:avoid}
thead{display:table-header-group}tfoot{display:table-row-group}
tr,figure,svg{break-inside:avoid}
svg{-webkit-print-color-adjust:exact;print-color-adjust:exact}
}
"""

SCRIPT = """
(function(){
var table=document.querySelector('table.data');if(!table)return;
var body=table.tBodies[0],rows=Array.prototype.slice.call(body.rows);
var heads=table.querySelectorAll('thead tr.names th');
var search=document.getElementById('search'),count=document.getElementById('shown');
var filters=table.querySelectorAll('tr.filters input');
function text(row,i){return row.cells[i]?row.cells[i].textContent:'';}
function apply(){
var q=(search.value||'').toLowerCase(),fs=[];
filters.forEach(function(f){if(f.value)fs.push([+f.dataset.col,f.value.toLowerCase()]);});
var n=0;rows.forEach(function(r){
var ok=!q||r.textContent.toLowerCase().indexOf(q)>=0;
for(var k=0;ok&&k<fs.length;k++){ok=text(r,fs[k][0]).toLowerCase().indexOf(fs[k][1])>=0;}
r.hidden=!ok;if(ok)n++;});
count.textContent=n.toLocaleString();}
search.addEventListener('input',apply);
filters.forEach(function(f){f.addEventListener('input',apply);});
heads.forEach(function(th,i){th.dataset.sort='';th.tabIndex=0;
function sort(){
var dir=th.getAttribute('aria-sort')==='ascending'?-1:1,num=th.classList.contains('num');
heads.forEach(function(h){h.removeAttribute('aria-sort');});
th.setAttribute('aria-sort',dir>0?'ascending':'descending');
rows.sort(function(a,b){var x=text(a,i),y=text(b,i);
if(x===''&&y!=='')return 1;if(y===''&&x!=='')return -1;
if(num){return dir*((parseFloat(x.replace(/,/g,''))||0)-(parseFloat(y.replace(/,/g,''))||0));}
return dir*x.localeCompare(y,undefined,{numeric:true,sensitivity:'base'});});
rows.forEach(function(r){body.appendChild(r);});}
th.addEventListener('click',sort);
th.addEventListener('keydown',function(e){
if(e.key==='Enter'||e.key===' '){e.preventDefault();sort();}});
});
})();
"""
