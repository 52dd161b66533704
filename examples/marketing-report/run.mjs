// The marketing-report example of seed 000, end to end through srt-mcp's
// MCP tools: a generated marketing CSV -> pandas summary -> two seaborn
// charts (after a deliberate error, its traceback, and the fix) -> a
// reportlab PDF -> read_artifact of the PDF -> every download_url fetched.
//
//   srt-mcp serve --port 8080 &
//   npm install && node run.mjs --url http://127.0.0.1:8080/mcp [--token T] [--out ./out]
//
// Prints one JSON line per check ({"check", "ok", "detail"}) and saves the
// downloaded files in --out. Exit status 0 only if every check passed.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const args = process.argv.slice(2);
const opt = (name, def) => {
  const i = args.indexOf(name);
  return i >= 0 ? args[i + 1] : def;
};
const url = opt("--url", "http://127.0.0.1:8080/mcp");
const token = opt("--token", process.env.SANDBOX_AUTH_TOKEN);
const out = opt("--out", "out");
const here = dirname(fileURLToPath(import.meta.url));
const step = (name) => readFileSync(join(here, "steps", name), "utf8");

let failed = 0;
function check(name, ok, detail) {
  if (!ok) failed++;
  console.log(JSON.stringify({ check: name, ok: !!ok, detail }));
}

// A deterministic marketing dataset: 12 weeks x 4 channels x 3 regions.
function marketingCSV() {
  let seed = 42;
  const rand = () => ((seed = (seed * 1103515245 + 12345) % 2147483648) / 2147483648);
  const channels = { search: [2.1, 0.05], social: [1.4, 0.03], email: [4.5, 0.08], display: [0.8, 0.01] };
  const lines = ["date,channel,region,spend,impressions,clicks,conversions,revenue"];
  const start = Date.UTC(2026, 0, 5);
  for (let d = 0; d < 84; d++) {
    const date = new Date(start + d * 86400000).toISOString().slice(0, 10);
    for (const [channel, [roas, cvr]] of Object.entries(channels)) {
      for (const region of ["north", "south", "west"]) {
        const spend = 200 + rand() * 800;
        const impressions = Math.round(spend * (40 + rand() * 20));
        const clicks = Math.round(impressions * (0.01 + rand() * 0.02));
        const conversions = Math.max(1, Math.round(clicks * cvr * (0.5 + rand())));
        const revenue = spend * roas * (0.7 + rand() * 0.6);
        lines.push([date, channel, region, spend.toFixed(2), impressions, clicks, conversions, revenue.toFixed(2)].join(","));
      }
    }
  }
  return lines.join("\n") + "\n";
}

const sc = (r) => r.structuredContent || {};

async function main() {
  const headers = token ? { Authorization: `Bearer ${token}` } : {};
  const transport = new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers } });
  const client = new Client({ name: "srt-mcp-marketing-example", version: "1.0.0" }, { capabilities: {} });
  await client.connect(transport);
  const call = (name, a) => client.callTool({ name, arguments: a }, undefined, { timeout: 120000 });

  // 1. Upload the CSV (the server names the session).
  const csv = marketingCSV();
  let r = await call("upload_file", { filename: "marketing.csv", content_base64: Buffer.from(csv).toString("base64") });
  const sid = sc(r).session_id;
  check("upload_file", !r.isError && /^sess_[0-9a-f]{12}$/.test(sid || "") && sc(r).path === "/mnt/data/marketing.csv", sc(r));
  r = await call("upload_file", { session_id: sid, filename: "marketing.csv", content_base64: "eA==" });
  check("upload_file again without overwrite is file_exists", r.isError && sc(r).error === "file_exists", sc(r));

  // 2. pandas summary.
  r = await call("run_python", { session_id: sid, code: step("01_summary.py") });
  check("summary runs", sc(r).exit_code === 0 && /Processed 1008 rows/.test(sc(r).stdout), { stdout: sc(r).stdout, stderr: sc(r).stderr });
  check("summary artifact", (sc(r).artifacts || []).map((a) => a.filename).join() === "summary_by_channel.csv", sc(r).artifacts);

  // 3. The deliberate error: a traceback, exit_code 1, no artifacts.
  r = await call("run_python", { session_id: sid, code: step("02_charts_broken.py") });
  const s = sc(r);
  check("the broken chart step fails with a traceback", s.exit_code === 1 && /Traceback/.test(s.stderr) && /KeyError: .*sales_amount/.test(s.stderr), { exit_code: s.exit_code, stderr: s.stderr?.slice(-300) });
  check("a failed run reports no artifacts", Array.isArray(s.artifacts) && s.artifacts.length === 0, s.artifacts);

  // 4. The fix: two seaborn charts, each an artifact with a link and a preview.
  r = await call("run_python", { session_id: sid, code: step("03_charts.py") });
  const charts = (sc(r).artifacts || []).map((a) => a.filename).sort();
  check("the fixed chart step makes two PNGs", sc(r).exit_code === 0 && charts.join() === "revenue_by_channel.png,weekly_roas.png", { charts, stderr: sc(r).stderr });
  const links = r.content.filter((c) => c.type === "resource_link").map((c) => c.uri);
  const previews = r.content.filter((c) => c.type === "image");
  check("resource_link per artifact", links.length === 2 && links.every((u) => u.startsWith(`artifact://${sid}/`)), links);
  check("image previews are small PNGs", previews.length === 2 && previews.every((p) => p.mimeType === "image/png" && Buffer.from(p.data, "base64").length <= 64 * 1024), previews.map((p) => Buffer.from(p.data, "base64").length));
  if (links.length > 0) {
    const res = await client.readResource({ uri: links[0] });
    const blob = Buffer.from(res.contents[0].blob || "", "base64");
    check("resources/read returns the full PNG", blob.subarray(1, 4).toString() === "PNG" && res.contents[0].mimeType === "image/png", blob.length);
  }

  // 5. The PDF report.
  r = await call("run_python", { session_id: sid, code: step("04_report.py") });
  const pdf = (sc(r).artifacts || []).find((a) => a.filename === "marketing_report.pdf");
  check("the report step makes a PDF", sc(r).exit_code === 0 && pdf && pdf.mime_type === "application/pdf", { artifacts: sc(r).artifacts, stderr: sc(r).stderr });

  // 6. read_artifact of the PDF.
  r = await call("read_artifact", { session_id: sid, path: "/mnt/data/marketing_report.pdf" });
  const bytes = Buffer.from(sc(r).content_base64 || "", "base64");
  check("read_artifact returns the PDF bytes", bytes.subarray(0, 5).toString() === "%PDF-" && bytes.length === sc(r).size_bytes, { size: bytes.length, head: bytes.subarray(0, 8).toString() });

  // 7. list_artifacts, then every download_url over plain HTTP.
  r = await call("list_artifacts", { session_id: sid });
  const all = sc(r).artifacts || [];
  check("list_artifacts lists the five files", all.map((a) => a.filename).sort().join() ===
    "marketing.csv,marketing_report.pdf,revenue_by_channel.png,summary_by_channel.csv,weekly_roas.png", all.map((a) => a.filename));
  mkdirSync(out, { recursive: true });
  const magic = { "application/pdf": "%PDF-", "image/png": "\x89PNG", "text/csv": "" };
  for (const a of all) {
    const res = await fetch(a.download_url);
    const body = Buffer.from(await res.arrayBuffer());
    writeFileSync(join(out, a.filename), body);
    const m = magic[a.mime_type] ?? "";
    check(`download ${a.filename}`, res.status === 200 && res.headers.get("content-type") === a.mime_type &&
      body.length === a.size_bytes && body.subarray(0, m.length).toString("latin1") === m &&
      /attachment; filename=/.test(res.headers.get("content-disposition") || ""), { status: res.status, type: res.headers.get("content-type"), size: body.length });
  }
  const tampered = all[0].download_url.replace(/sig=([0-9a-f])/, (_, c) => `sig=${c === "0" ? "1" : "0"}`);
  check("a tampered download_url is refused", (await fetch(tampered)).status === 403, tampered);

  // 8. Close the session: its files and links are gone.
  r = await call("close_session", { session_id: sid });
  check("close_session", sc(r).status === "closed", sc(r));
  check("downloads end with the session", (await fetch(all[0].download_url)).status === 404, null);
  await client.close();
}

main().then(
  () => process.exit(failed ? 1 : 0),
  (err) => {
    check("no exception", false, String(err?.stack || err));
    process.exit(1);
  },
);
