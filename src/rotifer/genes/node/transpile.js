// rotifer's TypeScript step: turns one gene's source into the JavaScript the
// runner executes.  It runs in a process of its own that never runs gene code
// (the compiler only parses the source), so what it prints is the compiler's
// output and nothing a gene wrote: rotifer caches it (genes/node/bridge.py).
//
// stdin:  {"code", "fileName", "nodeModules"}
// stdout: one JSON object: {"js": text} (the source itself for CommonJS
//         JavaScript, which needs no compiler), or {"error": "unavailable" |
//         "syntax", "message"}.
"use strict";

const fs = require("fs");
const path = require("path");
const vm = require("vm");
const Module = require("module");

function usesModuleSyntax(err) {
  return err instanceof SyntaxError &&
    /Unexpected token 'export'|Cannot use import statement outside a module/.test(err.message);
}

function loadTypeScript(modulesDir) {
  if (!modulesDir) return null;
  try {
    return require(path.join(modulesDir, "typescript"));
  } catch (err) {
    if (err.code !== "MODULE_NOT_FOUND") throw err;
    return null;
  }
}

function transpile(request) {
  if (!request.fileName.endsWith(".ts")) {
    try {
      new vm.Script(Module.wrap(request.code), { filename: request.fileName }); // compiled, not run
      return { js: request.code };
    } catch (err) {
      if (!usesModuleSyntax(err)) return { js: request.code }; // the runner reports it as before
    }
  }
  const ts = loadTypeScript(request.nodeModules);
  if (ts === null) return { error: "unavailable" };
  const out = ts.transpileModule(request.code, {
    fileName: request.fileName,
    reportDiagnostics: true,
    compilerOptions: {
      module: ts.ModuleKind.CommonJS,
      target: ts.ScriptTarget.ES2022,
      esModuleInterop: true,
      isolatedModules: true,
      sourceMap: false,
    },
  });
  const errors = (out.diagnostics || []).filter((d) => d.category === ts.DiagnosticCategory.Error);
  if (errors.length) {
    const text = errors.map((d) => ts.flattenDiagnosticMessageText(d.messageText, "\n")).join("; ");
    return { error: "syntax", message: `${request.fileName}: ${text}` };
  }
  return { js: out.outputText };
}

const request = JSON.parse(fs.readFileSync(0, "utf8"));
process.stdout.write(JSON.stringify(transpile(request)));
