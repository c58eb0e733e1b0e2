"""GitHub: which repository a workspace is on, the REST client, pull request texts, webhook events."""
