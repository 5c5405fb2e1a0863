-- When the plugin last looked up the session (to within a second): the web app shows it as
-- "plugin last seen". Advisory, like `claimer_seen_at`.
ALTER TABLE sessions ADD COLUMN plugin_seen_at INTEGER;
