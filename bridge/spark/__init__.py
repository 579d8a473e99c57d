"""The downstream Spark side: read the bridge's topics, apply them to Delta Lake tables."""
