// A minimal host app for the browser module's specs: the module's page API, on the relay's own
// origin under its CSP, with every status event recorded for the spec to read.
import { Sealpost } from '/sealpost/sealpost.js';

window.Sealpost = Sealpost;
window.events = [];
window.openTab = async (options) => {
  const tab = await Sealpost.open(options);
  tab.events = [];
  tab.on('*', (event) => { tab.events.push(event); window.events.push(event); });
  return tab;
};
document.documentElement.dataset.ready = 'yes';
