"""The SSH backend: a scheduler next to the server, each worker a Nanny started over SSH on one of the site's hosts."""
