'use strict';

// The portal's plotly.js: the core (scatter, the date and category axes, hover, legend,
// updatemenus, colorbar, modebar) and the heatmap, the only trace types the 메트릭 tab
// draws (metrics/figures.py: scatter; metrics/storage/straggler.py: heatmap).
var Plotly = require('plotly.js/lib/core');

Plotly.register([require('plotly.js/lib/heatmap')]);

module.exports = Plotly;
