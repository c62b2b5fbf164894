/* Embeds flamegraph.html into the binary as ember_flamegraph_html[_end]. */
	.section .rodata
	.global ember_flamegraph_html
	.global ember_flamegraph_html_end
ember_flamegraph_html:
	.incbin "flamegraph/flamegraph.html"
ember_flamegraph_html_end:
	.section .note.GNU-stack,"",@progbits
