"""The course itself: notebooks built from their sources (:mod:`.build`), the book (:mod:`.book`)."""
