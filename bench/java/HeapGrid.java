import java.util.ArrayList;
import java.util.List;

/**
 * A heap of many small objects for bench/heap.sh: ROWS lists of COLS
 * cells, each cell an object with a long[2] (two objects a cell), held
 * by a static field; it prints "cells N" once built, then idles SECONDS.
 * Usage: java HeapGrid ROWS COLS SECONDS
 */
public class HeapGrid {
    static final class Cell {
        final long[] values = new long[2];
        Cell next;
    }

    static final List<List<Cell>> GRID = new ArrayList<>();

    public static void main(String[] args) throws Exception {
        int rows = Integer.parseInt(args[0]), cols = Integer.parseInt(args[1]);
        double seconds = Double.parseDouble(args[2]);
        Cell last = null;
        for (int r = 0; r < rows; r++) {
            List<Cell> row = new ArrayList<>(cols);
            for (int c = 0; c < cols; c++) {
                Cell cell = new Cell();
                if (c % 7 == 0) cell.next = last;  // some sharing across rows
                last = cell;
                row.add(cell);
            }
            GRID.add(row);
        }
        System.out.println("cells " + (long) rows * cols);
        System.out.flush();
        Thread.sleep((long) (seconds * 1000));
    }
}
