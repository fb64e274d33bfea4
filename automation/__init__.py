"""The Automation API driver of split fleets (`python -m modelplane up|preview|destroy`).

Outside `modelplane/` because it needs the Pulumi SDK, which the core never imports."""
