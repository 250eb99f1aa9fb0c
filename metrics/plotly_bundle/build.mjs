// Builds ../../static/metrics/vendor/plotly-metrics.min.js from entry.js with the versions
// pinned in package-lock.json, as plotly.js builds its own dist (esbuild, an IIFE named
// Plotly, es2016, the same UMD wrapper), with two of plotly's config defaults that point
// off-site emptied or pointed to our static folder (the portal fetches nothing from
// elsewhere; its CSP allows only itself). Run: npm ci --ignore-scripts && npm run build.
import { readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import * as esbuild from 'esbuild';

const here = dirname(fileURLToPath(import.meta.url));
const out = join(here, '..', '..', 'static', 'metrics', 'vendor', 'plotly-metrics.min.js');
const version = JSON.parse(readFileSync(join(here, 'node_modules', 'plotly.js', 'package.json'))).version;

// Each replacement must apply exactly once, or the build fails: a new plotly.js that moved
// a default must not pass unnoticed.
const REPLACED = {
    'src/plot_api/plot_config.js': [
        ["dflt: 'https://cdn.plot.ly/un/'", "dflt: '/static/metrics/vendor/topojson/'"],
        ["dflt: 'https://cloud.plotly.com/newchart'", "dflt: ''"],
    ],
    // Only map traces (not in this bundle) load maplibre's stylesheet.
    'src/registry.js': [["require('maplibre-gl/dist/maplibre-gl.css');", '']],
};

// The attributes' documentation (plotly's schema text, never read when drawing), as
// plotly's own dist leaves it out: a `description:` that is a whole line of one string
// literal, or an array joined into one whose items, one a line, are string or template
// literals, names, or calls with simple arguments. Anything else stays.
const string = `(['"])(?:\\\\.|(?!\\1)[^\\n\\\\])*\\1`;
const item = `(?:${string}|\`[^\`\\n]*\`|[A-Za-z_$][\\w$.]*(?:\\([^()\\n]*\\))?)`;
const DESCRIPTIONS = [
    new RegExp(String.raw`^[ \t]*description: ${string},?[ \t]*\n`, 'gm'),
    new RegExp(String.raw`^[ \t]*description: \[(?:\s*${item}\s*,?)*\s*\]\.join\('[^'\n]*'\),?[ \t]*\n`, 'gm'),
];

const plotlySource = {
    name: 'plotly-source',
    setup(build) {
        build.onLoad({ filter: /plotly\.js[\\/]src[\\/].*\.js$/ }, (args) => {
            const path = args.path.replaceAll('\\', '/');
            let text = readFileSync(args.path, 'utf8');
            const key = Object.keys(REPLACED).find((name) => path.endsWith(name));
            for (const [before, after] of key ? REPLACED[key] : []) {
                const count = text.split(before).length - 1;
                if (count !== 1) throw new Error(`${key}: expected ${before} once, found ${count}`);
                text = text.replace(before, after);
            }
            for (const pattern of DESCRIPTIONS) text = text.replace(pattern, '');
            return { contents: text, loader: 'js' };
        });
    },
};

const result = await esbuild.build({
    entryPoints: [join(here, 'entry.js')],
    format: 'iife',
    globalName: 'Plotly',
    bundle: true,
    minify: true,
    target: 'es2016',
    define: { global: 'window', 'define.amd': 'false' },
    legalComments: 'eof',
    plugins: [plotlySource],
    write: false,
    logLevel: 'warning',
});

const banner = `/**
* plotly.js (scatter and heatmap - minified) v${version}, built for the VC portal
* (metrics/plotly_bundle)
* Copyright 2012-2026, Plotly, Inc.
* All rights reserved.
* Licensed under the MIT license
*/
(
 function(root, factory) {
  if (typeof module === "object" && module.exports) {
   module.exports = factory();
  } else {
   root.moduleName = factory();
  }
} (typeof self !== "undefined" ? self : this, () => {
`;
const footer = `
window.Plotly = Plotly;
return Plotly;
}));
`;
writeFileSync(out, banner + result.outputFiles[0].text + footer);
console.log(`${out}: ${(readFileSync(out).length / 1e6).toFixed(2)} MB, plotly.js ${version}`);
