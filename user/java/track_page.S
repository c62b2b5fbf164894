/* Embeds track.html, the page of `ember jvm --track`, as ember_track_html[_end]. */
	.section .rodata
	.global ember_track_html
	.global ember_track_html_end
ember_track_html:
	.incbin "user/java/track.html"
ember_track_html_end:
	.section .note.GNU-stack,"",@progbits
