"""Attacks on the server (issue #11): each probe as a test against a real `streamkeep serve` child process."""
